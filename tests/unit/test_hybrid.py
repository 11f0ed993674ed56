from datetime import datetime

import numpy as np
import pytest

from common.models.memory import Fact, FactSource, FactTime
from common.settings import SimilaritySettings
from common.similarity import TextQuery, hybrid, hybrid_many, jaccard
from common.store.space_index import SpaceIndex, _before
from common.text.keywords import match_key

# the paper's S_h: 0.7·cos + 0.3·keyword Jaccard (tests/unit/test_lexical.py covers BM25)
W = SimilaritySettings(alpha=0.7, beta=0.3, lexical="jaccard")


def kw(*keywords: str) -> TextQuery:
    return TextQuery.of("", keywords)


def fact(fid: str, keywords: list[str], participants: list[str]) -> Fact:
    return Fact(
        id=fid,
        tenant="t",
        space="s",
        text=f"fact {fid}",
        participants=participants,
        keywords=keywords,
        time=FactTime(session=datetime(2023, 5, 8, 12, 0)),
        source=FactSource(session_id="s1", session_seq=0, turn_ids=["s1:1"], positions=[1]),
    )


def vec(*xs: float) -> np.ndarray:
    return np.array(xs, dtype=np.float32)


@pytest.fixture
def index() -> SpaceIndex:
    idx = SpaceIndex(tenant="t", space="s", dimension=3)
    idx.put_fact(fact("f1", ["pottery", "class"], ["Priya"]), vec(1, 0, 0))
    idx.put_fact(fact("f2", ["hiking"], ["Tom"]), vec(0.6, 0.8, 0))
    idx.put_fact(fact("f3", ["pottery", "vase"], ["Priya", "Tom"]), vec(0, 0, 1))
    return idx


def ranked(
    idx: SpaceIndex, query: np.ndarray, keywords: list[str], **kw
) -> list[tuple[str, float]]:
    mask = kw.pop("mask", idx.facts.mask())
    found = idx.facts.hybrid(query, TextQuery.of("", keywords), W, mask, **kw)
    return [(s.id, round(s.score, 5)) for s in found]


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ({"a", "b"}, {"b", "c"}, 1 / 3),
        (["a", "a", "b"], ["a", "b"], 1.0),
        ({"a"}, {"b"}, 0.0),
        (set(), {"b"}, 0.0),
        (set(), set(), 0.0),
        ({"x", "y", "z", "w"}, {"x", "y"}, 0.5),
    ],
)
def test_jaccard(a, b, expected: float) -> None:
    assert jaccard(a, b) == pytest.approx(expected)


def test_hybrid_weights() -> None:
    assert hybrid(0.5, 1 / 3, W) == pytest.approx(0.45)
    assert hybrid(1.0, 0.0, W) == pytest.approx(0.7)
    assert hybrid(0.0, 1.0, W) == pytest.approx(0.3)
    assert hybrid(0.5, 0.5, SimilaritySettings(alpha=1.0, beta=0.0)) == pytest.approx(0.5)


def test_default_weights_are_07_03() -> None:
    assert (SimilaritySettings().alpha, SimilaritySettings().beta) == (0.7, 0.3)


def test_hybrid_many() -> None:
    out = hybrid_many(np.array([0.5, 1.0, 0.0]), np.array([1 / 3, 0.0, 1.0]), W)
    assert out == pytest.approx([0.45, 0.7, 0.3])


def test_index_ranks_by_hybrid_score(index: SpaceIndex) -> None:
    assert ranked(index, vec(1, 0, 0), ["pottery"]) == [("f1", 0.85), ("f2", 0.42), ("f3", 0.15)]
    assert ranked(index, vec(0, 1, 0), ["pottery", "vase"]) == [
        ("f2", 0.56),
        ("f3", 0.3),
        ("f1", 0.1),
    ]


def test_scored_carries_cosine_and_lexical(index: SpaceIndex) -> None:
    top = index.facts.hybrid(vec(0, 1, 0), kw("pottery", "vase"), W, index.facts.mask(), k=2)
    assert [s.id for s in top] == ["f2", "f3"]
    assert top[0].cosine == pytest.approx(0.8)
    assert top[0].lexical == 0.0
    assert top[1].cosine == pytest.approx(0.0)
    assert top[1].lexical == pytest.approx(1.0)


def test_index_jaccard_matches_pure_jaccard(index: SpaceIndex) -> None:
    got = index.facts.jaccard(["pottery", "vase", "kiln"])
    assert got == pytest.approx([1 / 4, 0.0, 2 / 3])
    assert index.facts.jaccard([]) == pytest.approx([0.0, 0.0, 0.0])


def test_mask_by_people(index: SpaceIndex) -> None:
    assert index.facts.mask().tolist() == [True, True, True]
    assert index.facts.mask(["Tom"]).tolist() == [False, True, True]
    assert index.facts.mask(["Priya"]).tolist() == [True, False, True]
    assert index.facts.mask(["Anika"]).tolist() == [False, False, False]
    assert index.facts.mask([]).tolist() == [False, False, False]
    mask = index.facts.mask(["Tom"])
    assert ranked(index, vec(1, 0, 0), ["pottery"], mask=mask) == [("f2", 0.42), ("f3", 0.15)]
    assert ranked(index, vec(1, 0, 0), ["pottery"], mask=index.facts.mask(["Anika"])) == []


def test_a_posting_read_keeps_only_the_rows_before_the_readers_end() -> None:
    # rows another thread appended past the reader's n are left out; a posting wholly
    # before it is used as it is, with no copy
    rows = np.array([4, 0, 7, 2], dtype=np.int64)
    assert _before(rows, 5).tolist() == [4, 0, 2]
    assert _before(rows, 8) is rows
    assert _before(rows, 7).tolist() == [4, 0, 2]  # the reader's end itself is past it
    assert _before(np.empty(0, dtype=np.int64), 0).size == 0


def test_exclude_and_k(index: SpaceIndex) -> None:
    assert ranked(index, vec(1, 0, 0), ["pottery"], exclude=["f1", "nope"]) == [
        ("f2", 0.42),
        ("f3", 0.15),
    ]
    assert ranked(index, vec(1, 0, 0), ["pottery"], k=1) == [("f1", 0.85)]
    assert ranked(index, vec(1, 0, 0), ["pottery"], exclude=["f1", "f2", "f3"]) == []


def test_ties_keep_insertion_order() -> None:
    idx = SpaceIndex(tenant="t", space="s", dimension=3)
    for fid in ["b", "a", "c"]:
        idx.put_fact(fact(fid, ["x"], ["P"]), vec(0, 1, 0))
    top = idx.facts.hybrid(vec(0, 1, 0), kw("x"), W, idx.facts.mask())
    assert [s.id for s in top] == ["b", "a", "c"]


def test_reupsert_replaces_keywords_people_and_vector(index: SpaceIndex) -> None:
    index.put_fact(fact("f1", ["ceramics"], ["Tom"]), vec(0, 1, 0))
    assert len(index.facts) == 3
    assert index.facts.get("f1").keywords == ["ceramics"]
    assert 0 not in index.facts.kw_postings[match_key("pottery")]
    assert index.facts.jaccard(["pottery"]) == pytest.approx([0.0, 0.0, 0.5])
    assert index.facts.jaccard(["ceramics"]) == pytest.approx([1.0, 0.0, 0.0])
    assert index.facts.mask(["Priya"]).tolist() == [False, False, True]
    assert index.facts.mask(["Tom"]).tolist() == [True, True, True]
    assert ranked(index, vec(0, 1, 0), ["ceramics"]) == [("f1", 1.0), ("f2", 0.56), ("f3", 0.0)]


def test_keywords_match_by_their_stem_and_stay_readable() -> None:
    idx = SpaceIndex(tenant="t", space="s", dimension=3)
    idx.put_fact(fact("f1", ["playing", "violin"], ["Ann"]), vec(1, 0, 0))
    idx.put_fact(fact("f2", ["played", "chess"], ["Ann"]), vec(1, 0, 0))
    idx.put_fact(fact("f3", ["player"], ["Ann"]), vec(1, 0, 0))
    assert idx.facts.get("f1").keywords == ["playing", "violin"]
    # "play" meets "playing" and "played"; "player" is another word
    assert idx.facts.jaccard(["play"]) == pytest.approx([0.5, 0.5, 0.0])


def test_remove(index: SpaceIndex) -> None:
    index.facts.remove("f2")
    assert len(index.facts) == 2
    assert "f2" not in index.facts and "f1" in index.facts
    assert [f.id for f in index.facts.items()] == ["f1", "f3"]
    assert index.facts.mask().tolist() == [True, False, True]
    assert index.facts.mask(["Tom"]).tolist() == [False, False, True]
    assert index.facts.jaccard(["hiking"]) == pytest.approx([0.0, 0.0, 0.0])
    assert ranked(index, vec(0.6, 0.8, 0), ["hiking"]) == [("f1", 0.42), ("f3", 0.0)]
    index.facts.remove("f2")
    index.facts.remove("missing")
    assert len(index.facts) == 2


def test_upsert_after_remove_revives_row(index: SpaceIndex) -> None:
    index.facts.remove("f2")
    index.put_fact(fact("f2", ["hiking"], ["Tom"]), vec(0.6, 0.8, 0))
    assert len(index.facts) == 3
    assert index.facts.rows["f2"] == 1
    assert ranked(index, vec(0, 1, 0), ["hiking"])[0] == ("f2", 0.86)


def test_empty_index_and_growth() -> None:
    idx = SpaceIndex(tenant="t", space="s", dimension=3)
    assert idx.facts.hybrid(vec(1, 0, 0), kw("x"), W, idx.facts.mask()) == []
    for i in range(70):
        idx.put_fact(fact(f"f{i}", [f"k{i}"], ["P"]), vec(1, 0, 0) if i == 69 else vec(0, 0, 1))
    assert len(idx.facts) == 70
    assert idx.facts.matrix.shape == (70, 3)
    top = idx.facts.hybrid(vec(1, 0, 0), kw("k69"), W, idx.facts.mask(["P"]), k=2)
    assert [(s.id, round(s.score, 5)) for s in top] == [("f69", 1.0), ("f0", 0.0)]


def test_top_k_with_ties_at_the_boundary_matches_a_full_sort() -> None:
    from common.store.space_index import _top_order

    rng = np.random.default_rng(7)
    for _ in range(50):
        score = rng.integers(0, 4, size=40).astype(np.float32) / 4  # many ties
        rows = rng.permutation(100)[:40]
        full = np.lexsort((rows, -score))
        for k in (1, 5, 13, 39, 40, 60):
            assert _top_order(score, rows, k).tolist() == full[:k].tolist()
