"""A posting keeps its rows as a set and as arrays: both must agree through appends, weight
changes, removals and the compaction that removals trigger, and a saved copy must read back
the same."""

from __future__ import annotations

import pickle
import random

import numpy as np
import pytest

from common.postings import Posting


def _as_dict(posting: Posting) -> dict[int, float]:
    rows, weights = posting.arrays()
    assert len(set(rows.tolist())) == rows.size  # each live row once
    return dict(zip(rows.tolist(), weights.tolist(), strict=True))


def test_rows_and_arrays_agree_through_every_change() -> None:
    rng = random.Random(7)
    posting = Posting()
    model: dict[int, float] = {}
    for _ in range(3000):
        row = rng.randrange(200)
        if rng.random() < 0.4:
            posting.drop(row)
            model.pop(row, None)
        else:
            weight = float(rng.randint(1, 5))
            posting.put(row, weight)
            model[row] = weight
        assert len(posting) == len(model)
    assert _as_dict(posting) == model
    assert set(posting) == set(model)
    assert all(posting.weight(row) == w for row, w in model.items())
    assert all(row in posting for row in model) and 999 not in posting


def test_arrays_keep_the_order_rows_were_added_in() -> None:
    posting = Posting()
    for row in (9, 3, 7, 1):
        posting.put(row)
    posting.drop(3)
    rows, weights = posting.arrays()
    assert rows.tolist() == [9, 7, 1]
    assert weights.tolist() == [1.0, 1.0, 1.0]


def test_removing_most_rows_compacts_the_arrays() -> None:
    posting = Posting()
    for row in range(100):
        posting.put(row)
    for row in range(90):
        posting.drop(row)
    rows, _ = posting.arrays()
    assert rows.tolist() == list(range(90, 100))
    # the slots were rewritten as removals passed half of them: never more dead than live
    _, _, size, dead = posting._data
    assert size < 100 and 2 * dead <= size


def test_arrays_read_before_an_append_are_not_changed_by_it() -> None:
    """A reader in another thread holds the arrays it was given: an append writes past
    their end, a growth swaps new arrays in."""
    posting = Posting()
    posting.put(1)
    rows, _ = posting.arrays()
    for row in range(2, 50):
        posting.put(row)
    assert rows.tolist() == [1]


def test_a_weight_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        Posting().put(1, 0.0)


def test_a_saved_posting_reads_back_the_same() -> None:
    posting = Posting()
    for row in range(20):
        posting.put(row, float(row + 1))
    for row in range(0, 20, 3):
        posting.drop(row)
    loaded = pickle.loads(pickle.dumps(posting))
    assert _as_dict(loaded) == _as_dict(posting)
    loaded.put(100, 2.0)
    assert np.isclose(loaded.weight(100), 2.0) and 100 not in posting
