"""A kind's records read from a saved index one row at a time (common/store/packed.py)."""

from __future__ import annotations

import pickle

import numpy as np

from common.models.memory import Fact, MemoryVersion
from common.store.packed import Records
from common.store.space_index import SpaceIndex
from common.text.lexical import Bm25, document_terms, query_terms
from tests.helpers.records import stored_fact

VERSION = MemoryVersion(
    extractor_backend="rules",
    extractor_model="-",
    general_model="-",
    prompts={},
    settings_hash="0" * 12,
)


def _fact(i: int) -> Fact:
    fact = stored_fact(f"f{i}", f"Ann kept fact {i}.", ["kept", f"k{i}"], ("Ann",))
    return fact.model_copy(update={"memory_version": VERSION})


def test_a_loaded_row_stays_packed_until_read_then_equals_what_was_saved() -> None:
    kept: Records[Fact] = Records()
    facts = [_fact(i) for i in range(5)]
    for fact in facts:
        kept.append(fact)
    kept[3] = None  # a removed row
    loaded: Records[Fact] = pickle.loads(pickle.dumps(kept))
    assert loaded.packed() == 4 and len(loaded) == 5
    assert loaded[1] == facts[1] and loaded.packed() == 3
    assert loaded[1] is loaded[1]  # read once, then kept in place
    assert loaded[3] is None
    assert list(loaded) == [facts[0], facts[1], facts[2], None, facts[4]]
    assert loaded.packed() == 0
    # the versions that built the records come back as the process's one instance
    assert loaded[0].memory_version is loaded[4].memory_version is not None
    again: Records[Fact] = pickle.loads(pickle.dumps(pickle.loads(pickle.dumps(kept))))
    assert list(again) == list(loaded)  # packed rows are saved again as they are


def test_a_record_written_while_its_packed_row_is_read_is_never_replaced() -> None:
    """A reader unpickled the row, then a writer stored a newer record before the reader
    kept what it read: the newer record stays, and the reader gets it."""
    kept: Records[Fact] = Records()
    kept.append(_fact(0))
    loaded: Records[Fact] = pickle.loads(pickle.dumps(kept))
    raw = loaded._rows[0]
    assert isinstance(raw, bytes)
    newer = _fact(0).model_copy(update={"text": "Ann moved to Oslo."})
    loaded[0] = newer
    assert loaded._unpack(0, raw) is newer
    assert loaded[0] is newer


def test_a_saved_index_keeps_only_its_rows_of_the_matrix_and_grows_after_loading() -> None:
    index = SpaceIndex(tenant="t", space="s", dimension=4)
    rng = np.random.default_rng(0)
    vectors = rng.random((70, 4)).astype(np.float32)
    for i in range(70):  # past the first capacity of 64 rows: 128
        index.put_fact(_fact(i), vectors[i])
    saved = index.facts.__getstate__()["_matrix"]
    assert isinstance(saved, np.ndarray) and saved.shape == (70, 4)
    loaded: SpaceIndex = pickle.loads(pickle.dumps(index))
    assert loaded.facts.records.packed() == 70
    assert np.array_equal(loaded.facts.matrix, vectors)
    for i in range(70, 140):  # through the next growth
        loaded.put_fact(_fact(i), np.ones(4, dtype=np.float32))
    assert np.array_equal(loaded.facts.matrix[:70], vectors)
    assert loaded.facts.get("f69") == _fact(69) and len(loaded.facts) == 140


def test_bm25_term_counts_read_packed_score_alike_and_are_replaced_on_write() -> None:
    lexicon = Bm25()
    texts = ["Ann paints lakes at dawn", "Bo paints boats", "Ann rows a boat on the lake"]
    for row, text in enumerate(texts):
        lexicon.set(row, document_terms(text))
    loaded: Bm25 = pickle.loads(pickle.dumps(lexicon))
    query = query_terms("who paints the lake boats")
    rows = np.arange(3)
    assert np.array_equal(loaded.scores(query, 3, 1.2, 0.75), lexicon.scores(query, 3, 1.2, 0.75))
    assert np.array_equal(
        loaded.scores_at(query, rows, 1.2, 0.75), lexicon.scores_at(query, rows, 1.2, 0.75)
    )
    for each in (loaded, lexicon):  # a packed row rewritten, another cleared
        each.set(1, document_terms("Bo sails boats"))
        each.clear(2)
    assert loaded.documents == lexicon.documents == 2
    assert loaded.df("paint") == lexicon.df("paint") and loaded.df("lake") == lexicon.df("lake")
    assert np.array_equal(loaded.scores(query, 3, 1.2, 0.75), lexicon.scores(query, 3, 1.2, 0.75))
