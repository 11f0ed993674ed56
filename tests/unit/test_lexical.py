"""The lexical channel: BM25 against values worked out by hand, kept right through upserts
and erasure, and odd input that contributes nothing instead of failing."""

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from common.models.memory import Fact
from common.settings import SimilaritySettings
from common.similarity import TextQuery
from common.store.space_index import SpaceIndex
from common.text.lexical import MAX_TERMS, Bm25, document_terms, query_terms, terms
from tests.helpers.records import stored_fact

K1, B = 1.2, 0.75
BM25 = SimilaritySettings(alpha=0.7, beta=0.3, lexical="bm25", bm25_k1=K1, bm25_b=B)

# Three rows: lengths 2, 2 and 4, so avgdl = 8/3.
#   idf(a) = ln(1 + (3 - 2 + 0.5) / (2 + 0.5)) = ln 1.6       = 0.470004  (df 2)
#   idf(c) = ln(1 + (3 - 1 + 0.5) / (1 + 0.5)) = ln 2.666667  = 0.980829  (df 1)
#   length factor K(dl) = k1·(1 − b + b·dl/avgdl): K(2) = 1.2·0.8125 = 0.975, K(4) = 1.65
#   row 0, a once:  0.470004 · 2.2 / (1 + 0.975) = 0.523549
#   row 1, a twice: 0.470004 · 4.4 / (2 + 0.975) = 0.695132
#   row 2, c once:  0.980829 · 2.2 / (1 + 1.65)  = 0.814274
ROWS = [Counter(a=1, b=1), Counter(a=2), Counter(c=1, d=1, e=1, f=1)]


def filled() -> Bm25:
    bm25 = Bm25()
    for row, counts in enumerate(ROWS):
        bm25.set(row, counts)
    return bm25


def test_idf_and_scores_by_hand() -> None:
    bm25 = filled()
    assert bm25.documents == 3
    assert bm25.average_length == pytest.approx(8 / 3)
    assert bm25.idf("a") == pytest.approx(0.470004, abs=1e-6)
    assert bm25.idf("c") == pytest.approx(0.980829, abs=1e-6)
    assert bm25.scores({"a"}, 3, K1, B) == pytest.approx([0.523549, 0.695132, 0.0], abs=1e-5)
    assert bm25.scores({"a", "c"}, 3, K1, B) == pytest.approx(
        [0.523549, 0.695132, 0.814274], abs=1e-5
    )
    # a term no row holds adds nothing; rows past n are not scored
    assert bm25.scores({"zzz"}, 3, K1, B) == pytest.approx([0.0, 0.0, 0.0])
    assert bm25.scores({"c"}, 2, K1, B) == pytest.approx([0.0, 0.0])


def test_length_normalisation_by_hand() -> None:
    bm25 = filled()
    # b = 0: no length normalisation, K = k1 for every row: 0.980829 · 2.2 / 2.2
    assert bm25.scores({"c"}, 3, K1, 0.0)[2] == pytest.approx(0.980829, abs=1e-6)
    # b = 1: K(4) = 1.2 · 4 / (8/3) = 1.8: 0.980829 · 2.2 / 2.8 = 0.770651
    assert bm25.scores({"c"}, 3, K1, 1.0)[2] == pytest.approx(0.770651, abs=1e-6)
    # k1 = 0: term frequency saturates at once, the score is the IDF
    assert bm25.scores({"a"}, 3, 0.0, B) == pytest.approx([0.470004, 0.470004, 0.0], abs=1e-6)


def test_normalised_is_the_share_of_the_query_idf() -> None:
    bm25 = filled()
    ceiling = 0.470004 + 0.980829
    assert bm25.normalised({"a", "c"}, 3, K1, B) == pytest.approx(
        [0.523549 / ceiling, 0.695132 / ceiling, 0.814274 / ceiling], abs=1e-5
    )
    # a row over the query's IDF (a repeated term in a short row) is held at 1
    assert bm25.normalised({"a"}, 3, K1, B) == pytest.approx([1.0, 1.0, 0.0])
    # a query term absent from the space still counts in the ceiling: idf = ln(1 + 3.5/0.5)
    assert bm25.normalised({"c", "zzz"}, 3, K1, B)[2] == pytest.approx(
        0.814274 / (0.980829 + np.log(8.0)), abs=1e-5
    )


def test_erasure_moves_idf_and_average_length() -> None:
    bm25 = filled()
    bm25.clear(2)
    # two rows of length 2: avgdl 2, K(2) = 1.2; idf(a) = ln(1 + 0.5/2.5) = ln 1.2
    assert bm25.documents == 2 and bm25.average_length == pytest.approx(2.0)
    assert bm25.df("c") == 0
    assert bm25.idf("a") == pytest.approx(np.log(1.2))
    assert bm25.scores({"a"}, 3, K1, B) == pytest.approx(
        [np.log(1.2) * 2.2 / 2.2, np.log(1.2) * 4.4 / 3.2, 0.0], abs=1e-6
    )
    assert bm25.scores({"c"}, 3, K1, B) == pytest.approx([0.0, 0.0, 0.0])
    bm25.clear(2)  # twice: nothing more happens
    bm25.clear(17)
    assert bm25.documents == 2


def test_upsert_replaces_a_row_and_new_rows_join() -> None:
    bm25 = filled()
    bm25.scores({"a"}, 3, K1, B)  # posting arrays cached, then made stale by the writes
    bm25.set(1, Counter(c=1))  # row 1 reworded: a → c
    bm25.set(70, Counter(a=1))  # past the first capacity
    # rows 0 {a,b}, 1 {c}, 2 {c,d,e,f}, 70 {a}: N 4, avgdl 8/4 = 2, df(a) 2, df(c) 2
    idf = np.log(1 + 2.5 / 2.5)
    assert bm25.df("a") == 2 and bm25.df("c") == 2
    got = bm25.scores({"a"}, 71, K1, B)
    assert got[0] == pytest.approx(idf * 2.2 / (1 + 1.2), abs=1e-6)  # K(2) = 1.2
    assert got[1] == 0.0
    assert got[70] == pytest.approx(idf * 2.2 / (1 + 1.2 * (0.25 + 0.75 / 2)), abs=1e-6)
    assert bm25.scores({"c"}, 71, K1, B)[1] == pytest.approx(
        idf * 2.2 / (1 + 1.2 * (0.25 + 0.75 / 2)), abs=1e-6
    )


def test_terms_fold_case_drop_stop_words_and_stem() -> None:
    assert terms("Caroline's POTTERY classes: she glazed the vases.") == [
        "carolin",
        "potteri",
        "class",
        "glaze",
        "vase",
    ]
    assert terms("playing") == terms("plays") == terms("play")
    assert terms("In 2023, 7 kids") == ["2023", "kid"]
    assert document_terms("kiln pottery", ["pottery", "glaze"]) == Counter(
        kiln=1, potteri=2, glaze=1
    )
    found = query_terms("Where does Priya fire pottery?", ["pottery"])
    assert found == {"priya", "fire", "potteri"}


@pytest.mark.parametrize(
    "text",
    ["", "   ", "the of and is a it", "!!! ... ??? ---", "😀🎉👍", "\u200b\u200b", "\x00\x01"],
)
def test_texts_without_content_words_have_no_terms(text: str) -> None:
    assert terms(text) == []
    assert query_terms(text) == frozenset()


def test_very_long_texts_are_cut() -> None:
    long = "pottery " * 100_000
    assert len(terms(long)) == MAX_TERMS
    assert document_terms(long)["potteri"] == MAX_TERMS


def test_non_latin_words_are_their_own_terms() -> None:
    assert terms("Он живёт в Москве. 東京タワー") == ["он", "живёт", "москве", "東京タワー"]
    assert terms("ΣΟΦΙΑ") == terms("σοφια")
    # combining marks stay inside their word
    assert terms("नमस्ते दुनिया") == ["नमस्ते", "दुनिया"]
    assert terms("مَرْحَبًا بِكُم") == ["مَرْحَبًا", "بِكُم"]
    # Latin words lose their accents before stemming
    assert terms("Café cafés naïve") == ["cafe", "cafe", "naiv"]


def test_posting_arrays_follow_new_rows() -> None:
    bm25 = filled()
    assert bm25.scores({"c"}, 4, K1, B)[3] == 0.0  # arrays of "c" cached
    bm25.set(3, Counter(c=1, g=1))
    assert bm25.scores({"c"}, 4, K1, B)[3] > 0
    bm25.set(2, Counter(d=1))  # "c" leaves row 2
    got = bm25.scores({"c"}, 4, K1, B)
    assert got[2] == 0.0 and got[3] > 0


# Through the space index: facts with texts, queries through TextQuery.


def vec(*xs: float) -> np.ndarray:
    v = np.array(xs, dtype=np.float32)
    out: np.ndarray = v / np.linalg.norm(v)
    return out


def fact(fid: str, text: str, keywords: list[str] | None = None) -> Fact:
    return stored_fact(fid, text, keywords)


@pytest.fixture
def index() -> SpaceIndex:
    idx = SpaceIndex(tenant="t", space="s", dimension=3)
    idx.put_fact(fact("f0", "Priya glazed a vase."), vec(1, 0, 0))  # priya glaze vase
    idx.put_fact(fact("f1", "Priya likes hiking."), vec(0, 1, 0))  # priya like hike
    idx.put_fact(fact("f2", "Priya fired the vase in a kiln."), vec(0, 0, 1))  # + kiln
    return idx


def test_space_index_scores_fact_texts_by_hand(index: SpaceIndex) -> None:
    # N 3, lengths 3, 3, 4: avgdl 10/3; idf(kiln) = ln(1 + 2.5/1.5), idf(vase) = ln 1.6
    # K(3) = 1.2·(0.25 + 0.75·0.9) = 1.11, K(4) = 1.2·(0.25 + 0.75·1.2) = 1.38
    vase0 = np.log(1.6) * 2.2 / 2.11
    vase2 = np.log(1.6) * 2.2 / 2.38
    kiln2 = np.log(1 + 2.5 / 1.5) * 2.2 / 2.38
    ceiling = np.log(1.6) + np.log(1 + 2.5 / 1.5)
    got = index.facts.bm25(TextQuery.of("Which vase went into the kiln?"), BM25)
    assert got == pytest.approx([vase0 / ceiling, 0.0, (vase2 + kiln2) / ceiling], abs=1e-5)
    # S_h = 0.7·cos + 0.3·L
    ranked = index.facts.hybrid(
        vec(0, 1, 0), TextQuery.of("Which vase went into the kiln?"), BM25, index.facts.mask()
    )
    assert [(r.id, round(r.score, 5)) for r in ranked] == [
        ("f1", 0.7),
        ("f2", round(0.3 * (vase2 + kiln2) / ceiling, 5)),
        ("f0", round(0.3 * vase0 / ceiling, 5)),
    ]
    assert ranked[1].lexical == pytest.approx((vase2 + kiln2) / ceiling, abs=1e-5)


def test_space_index_follows_rewording_and_erasure(index: SpaceIndex) -> None:
    query = TextQuery.of("kiln")
    assert index.facts.bm25(query, BM25)[2] > 0
    index.put_fact(fact("f2", "Priya fired a bowl."), vec(0, 0, 1))  # reworded: kiln gone
    assert index.facts.bm25(query, BM25) == pytest.approx([0.0, 0.0, 0.0])
    assert index.facts.lexical(query, BM25) == pytest.approx([0.0, 0.0, 0.0])
    index.put_fact(fact("f1", "Priya bought a kiln."), vec(0, 1, 0))
    assert index.facts.lexical(query, BM25)[1] == pytest.approx(1.0)  # the cache moved on
    index.facts.remove("f1")  # erased: its terms leave the postings and the IDF
    assert index.facts.lexicon.documents == 2
    assert index.facts.lexicon.df("kiln") == 0
    assert index.facts.lexical(query, BM25) == pytest.approx([0.0, 0.0, 0.0])


def test_keywords_count_as_a_second_field(index: SpaceIndex) -> None:
    # an extractor's keyword that the text lacks still matches
    index.put_fact(fact("f1", "Priya likes walking uphill.", ["hiking"]), vec(0, 1, 0))
    assert index.facts.bm25(TextQuery.of("hiking trips"), BM25)[1] > 0


@pytest.mark.parametrize(
    "question",
    [
        "",
        "what is it that they did?",
        "?!?! ... ---",
        "😀🎉👍",
        "Что она сделала?",
        "她做了什么？",
        "vase " * 50_000,
    ],
)
def test_odd_questions_fall_back_to_the_dense_score(index: SpaceIndex, question: str) -> None:
    dense = index.facts.cosines(vec(0.2, 0.1, 1.0))
    ranked = index.facts.hybrid(
        vec(0.2, 0.1, 1.0), TextQuery.of(question), BM25, index.facts.mask()
    )
    lexical = index.facts.lexical(TextQuery.of(question), BM25)
    assert np.all((lexical >= 0) & (lexical <= 1))
    if not question.strip().startswith("vase"):
        assert [r.id for r in ranked] == [index.facts.ids[i] for i in np.argsort(-dense)]
        assert [r.score for r in ranked] == pytest.approx(sorted(0.7 * dense, reverse=True))


def test_facts_without_content_words_are_scored_zero() -> None:
    idx = SpaceIndex(tenant="t", space="s", dimension=3)
    idx.put_fact(fact("e0", "😀 !!!"), vec(1, 0, 0))
    idx.put_fact(fact("e1", "the of and"), vec(0, 1, 0))
    # no row has a term: no IDF, no average length, no score
    assert idx.facts.bm25(TextQuery.of("pottery"), BM25) == pytest.approx([0.0, 0.0])
    idx.put_fact(fact("e2", "pottery"), vec(0, 0, 1))
    # rows without terms are not documents: N 1, avgdl 1, K(1) = 1.2, L = 2.2 / 2.2
    assert idx.facts.lexicon.documents == 1
    assert idx.facts.lexicon.average_length == pytest.approx(1.0)
    assert idx.facts.bm25(TextQuery.of("pottery"), BM25) == pytest.approx([0.0, 0.0, 1.0])


def test_the_papers_jaccard_stays_a_setting(index: SpaceIndex) -> None:
    jaccard = SimilaritySettings(alpha=0.7, beta=0.3, lexical="jaccard")
    index.put_fact(fact("f1", "Priya likes hiking.", ["hiking"]), vec(0, 1, 0))
    query = TextQuery.of("kiln hiking", ["hiking"])
    assert index.facts.lexical(query, jaccard) == pytest.approx([0.0, 1.0, 0.0])
    assert index.facts.lexical(query, BM25)[2] > 0  # BM25 reads the text: f2 has "kiln"


def test_a_saved_index_keeps_its_postings(index: SpaceIndex) -> None:
    import pickle

    query = TextQuery.of("vase kiln")
    before = index.facts.bm25(query, BM25)
    loaded = pickle.loads(pickle.dumps(index))
    assert loaded.facts.bm25(query, BM25) == pytest.approx(before)
    loaded.facts.remove("f2")
    assert loaded.facts.lexicon.df("kiln") == 0 and index.facts.lexicon.df("kiln") == 1


def test_the_memo_is_keyed_by_the_bm25_settings(index: SpaceIndex) -> None:
    query = TextQuery.of("vase kiln")
    plain = index.facts.lexical(query, BM25)
    saturated = index.facts.lexical(query, BM25.model_copy(update={"bm25_k1": 0.0}))
    # k1 = 0: every matched term counts its IDF once: f2 holds both terms
    assert saturated[2] == pytest.approx(1.0)
    assert plain[2] != pytest.approx(saturated[2])


def test_a_read_during_a_write_keeps_nothing_stale(index: SpaceIndex) -> None:
    """A query in another thread can run while a commit upserts: what it computes then is
    not kept, so the next read sees the write and the full number of rows."""
    query = TextQuery.of("kiln")
    lexicon = index.facts.lexicon
    real_set = lexicon.set
    seen: list[np.ndarray] = []

    def set_and_read(row: int, counts: Counter[str]) -> None:
        seen.append(index.facts.lexical(query, BM25))  # the row is there, not yet indexed
        real_set(row, counts)

    lexicon.set = set_and_read  # type: ignore[method-assign]
    index.put_fact(fact("f3", "Priya cleaned the kiln."), vec(0, 1, 1))
    lexicon.set = real_set  # type: ignore[method-assign]
    assert seen[0][3] == 0.0
    after = index.facts.lexical(query, BM25)
    assert after.size == 4 and after[3] > 0


def test_erased_text_leaves_the_saved_index(index: SpaceIndex) -> None:
    import pickle

    index.put_fact(
        fact("f3", "Priya told Tom about her zorblax diagnosis.", ["zorblax"]), vec(0, 1, 1)
    )
    # verification queries with a fact's own text: the memo holds it
    index.facts.hybrid(
        vec(0, 1, 1), TextQuery.of("zorblax diagnosis", ["zorblax"]), BM25, index.facts.mask()
    )
    index.facts.remove("f3")
    assert index.facts.lexicon.df("zorblax") == 0
    assert "zorblax" not in index.facts.kw_postings
    saved = pickle.dumps(index)
    assert b"zorblax" not in saved and b"diagnosis" not in saved
    index.put_fact(fact("f3", "Priya likes tea."), vec(0, 1, 1))  # the id can come back
    assert index.facts.get("f3").text == "Priya likes tea."


def test_search_reads_the_question_text_not_only_its_keywords(tmp_path: Path) -> None:
    """The keywords of a question leave out numbers and names; BM25 reads its text."""
    from common.retrieval.search import search
    from tests.helpers.contexts import make_ctx
    from tests.helpers.doubles import TableEncoder, unit

    ctx = make_ctx(tmp_path, TableEncoder({"2019?": unit(1, 0, 0, 0)}))
    ctx.settings.similarity = SimilaritySettings(alpha=0.3, beta=0.7)
    index = ctx.index("t", "s")
    index.put_fact(fact("near", "Priya went to a concert."), unit(1, 0, 0, 0))
    index.put_fact(fact("year", "Priya hiked Zion in 2019."), unit(0, 1, 0, 0))
    result = search(ctx, "t", "s", "2019?", k=2, mode="flat")
    assert result.intent.keywords == []
    assert [h.fact.id for h in result.hits] == ["year", "near"]
    assert result.timings_ms["lexical"] >= 0


def test_a_few_rows_scored_from_their_own_terms_match_the_scan() -> None:
    rng = np.random.default_rng(5)
    vocabulary = [f"w{i}" for i in range(30)]
    bm25 = Bm25()
    for row in range(400):
        words = rng.choice(vocabulary, size=int(rng.integers(1, 9)))
        bm25.set(row, Counter(words.tolist()))
    bm25.clear(7)  # a removed row scores nothing either way
    query = {"w1", "w4", "w9", "w29", "absent"}
    rows = np.array([0, 7, 13, 77, 78, 399, 250])
    everything = bm25.scores(query, 400, K1, B)
    assert bm25.scores_at(query, rows, K1, B) == pytest.approx(everything[rows], rel=1e-5)
    assert bm25.normalised(query, 400, K1, B, rows) == pytest.approx(
        bm25.normalised(query, 400, K1, B)[rows], rel=1e-5
    )
    assert bm25.scan_cost(query) == sum(bm25.df(t) for t in query)
