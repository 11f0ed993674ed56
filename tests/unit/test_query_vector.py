"""The question's vector for S_h: its embedding less a share of its projection on the names
of the participants it names (`retrieval.nameless_weight`, common/retrieval/names.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from common.models.query import QueryIntent
from common.retrieval.names import NameVectors, away_from
from common.retrieval.search import query_vectors, search
from common.store import records
from tests.helpers.contexts import make_ctx
from tests.helpers.doubles import TableEncoder, unit
from tests.helpers.records import stored_fact

QUESTION = "What does Priya bake?"


def encoder() -> TableEncoder:
    return TableEncoder({QUESTION: unit(1, 1, 0, 0), "Priya": unit(1, 0, 0, 0)})


class Recorder(TableEncoder):
    def __init__(self) -> None:
        super().__init__({QUESTION: unit(1, 1, 0, 0), "Priya": unit(1, 0, 0, 0)})
        self.texts: list[list[str]] = []

    def encode(self, texts: list[str]) -> np.ndarray:
        self.texts.append(list(texts))
        return super().encode(texts)


@pytest.mark.parametrize(
    ("weight", "expected"),
    [(0.5, [0.5, 1.0, 0, 0]), (1.0, [0, 1.0, 0, 0]), (0.0, [1.0, 1.0, 0, 0])],
)
def test_a_share_of_the_projection_on_the_name_is_taken_away(
    weight: float, expected: list[float]
) -> None:
    v = (np.array([1, 1, 0, 0]) / np.sqrt(2)).astype(np.float32)
    out = away_from(v, np.stack([unit(1, 0, 0, 0)]), weight)
    np.testing.assert_allclose(out, np.array(expected) / np.sqrt(2), atol=1e-6)
    assert out.dtype == np.float32


def test_the_projection_is_on_the_span_of_the_names() -> None:
    """Two names: both directions go, in any order; a name twice counts once."""
    v = unit(1, 1, 1, 0)
    names = np.stack([unit(1, 1, 0, 0), unit(1, -1, 0, 0)])
    np.testing.assert_allclose(away_from(v, names, 1.0), [0, 0, v[2], 0], atol=1e-6)
    np.testing.assert_allclose(away_from(v, names[::-1], 1.0), [0, 0, v[2], 0], atol=1e-6)
    twice = np.stack([unit(1, 0, 0, 0), unit(1, 0, 0, 0)])
    np.testing.assert_allclose(away_from(v, twice, 1.0), away_from(v, twice[:1], 1.0), atol=1e-6)


def test_names_are_embedded_once_with_the_question_and_kept() -> None:
    cache = NameVectors(capacity=2)
    enc = Recorder()
    question, people = cache.with_names(QUESTION, ["Priya", "Priya"], enc.encode)
    np.testing.assert_allclose(question, unit(1, 1, 0, 0))
    assert people.shape == (1, 4)
    cache.with_names(QUESTION, ["Priya"], enc.encode)
    cache.with_names("Who is Tom?", ["Tom", "Ann"], enc.encode)  # Priya leaves the cache
    cache.with_names(QUESTION, ["Priya"], enc.encode)
    assert enc.texts == [
        [QUESTION, "Priya"],
        [QUESTION],
        ["Who is Tom?", "Tom", "Ann"],
        [QUESTION, "Priya"],
    ]


@pytest.mark.parametrize(("participants", "weight"), [([], 0.5), (["Priya"], 0.0)])
def test_the_plain_embedding_when_no_one_is_named_or_the_weight_is_zero(
    tmp_path: Path, participants: list[str], weight: float
) -> None:
    ctx = make_ctx(tmp_path, Recorder())
    ctx.settings.retrieval.nameless_weight = weight
    vector, plain = query_vectors(ctx, QUESTION, QueryIntent(participants=participants))
    assert vector is plain
    np.testing.assert_allclose(plain, unit(1, 1, 0, 0))
    assert ctx.embedder.texts == [[QUESTION]]  # type: ignore[attr-defined]


def test_the_vector_for_a_named_participant(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, encoder())
    ctx.settings.retrieval.nameless_weight = 0.5
    vector, plain = query_vectors(ctx, QUESTION, QueryIntent(participants=["Priya"]))
    np.testing.assert_allclose(plain, unit(1, 1, 0, 0))
    np.testing.assert_allclose(vector, np.array([0.5, 1, 0, 0]) / np.sqrt(2), atol=1e-6)


@pytest.mark.parametrize(("weight", "first"), [(0.0, "name"), (0.5, "topic")])
def test_recall_ranks_by_what_is_asked_rather_than_by_the_name(
    tmp_path: Path, weight: float, first: str
) -> None:
    """Both facts are Priya's. One lies close to the name's direction, the other along what
    the question asks; with the weight, the second comes first."""
    ctx = make_ctx(tmp_path, encoder())
    space = records.require_space(ctx.store, "t", "s")
    records.put_space(ctx.store, space.model_copy(update={"participants": ["Priya"]}))
    ctx.settings.retrieval.nameless_weight = weight
    index = ctx.index("t", "s")
    index.put_fact(stored_fact("name", "Priya visited Rome."), unit(1, 0.2, 0, 0))
    index.put_fact(stored_fact("topic", "Priya makes sourdough."), unit(0, 1, 0, 0))
    result = search(ctx, "t", "s", QUESTION, k=2, mode="flat")
    assert result.intent.participants == ["Priya"]
    assert [h.fact.id for h in result.hits] == (
        [first] + [i for i in ("name", "topic") if i != first]
    )


def test_pending_turns_are_ranked_with_the_plain_embedding(tmp_path: Path) -> None:
    """A pending turn along the name's direction only: with the whole name taken out of the
    question's vector it would score under the pending floor; it is ranked with the
    question's own embedding, which that floor was set on."""
    from datetime import datetime

    from common.models.session import SessionInput, Turn

    ctx = make_ctx(tmp_path, encoder())
    space = records.require_space(ctx.store, "t", "s")
    records.put_space(ctx.store, space.model_copy(update={"participants": ["Priya"]}))
    ctx.settings.retrieval.nameless_weight = 1.0
    ctx.embedder.table["Priya: Hello there."] = unit(1, 0, 0, 0)  # type: ignore[attr-defined]
    session = SessionInput(
        session_id="s1",
        started_at=datetime(2024, 5, 8, 9, 0),
        participants=["Priya"],
        turns=[Turn(speaker="Priya", text="Hello there.")],
    )
    result = search(ctx, "t", "s", QUESTION, mode="flat", pending=[session])
    (turn,) = result.pending
    assert turn.turn.text == "Hello there."
    assert turn.score > ctx.settings.retrieval.pending_min_score
