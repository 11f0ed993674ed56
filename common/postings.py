"""A posting: the rows that hold one key (a term, a keyword, a participant), each with a weight.

The set of rows answers membership and iteration; the same rows as arrays answer a scoring
pass without reading the set. Adding a row appends to the arrays and removing one zeroes its
weight, so a space that grows by one fact never rebuilds the arrays of a key thousands of
facts share (a speaker's name, a month). Reading the arrays of a posting with removed rows
filters them out, and the arrays are rewritten once removed slots outnumber the live ones.

A reader in another thread takes its arrays from one tuple: appends write past the end it
was given, and grown or compacted arrays are swapped in whole.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

_FIRST = 4  # slots of a new posting
_Arrays = tuple[np.ndarray, np.ndarray, int, int]


class Posting:
    __slots__ = ("_slot", "_data")

    def __init__(self) -> None:
        self._slot: dict[int, int] = {}  # row -> its slot in the arrays
        empty = (np.empty(_FIRST, dtype=np.int64), np.empty(_FIRST, dtype=np.float32))
        # the arrays, the slots in use, and how many of those hold a removed row
        self._data: _Arrays = (*empty, 0, 0)

    def __getstate__(self) -> tuple[dict[int, int], _Arrays]:
        rows, weights, size, dead = self._data
        return self._slot, (rows[:size].copy(), weights[:size].copy(), size, dead)

    def __setstate__(self, state: tuple[dict[int, int], _Arrays]) -> None:
        self._slot, self._data = state

    def __len__(self) -> int:
        return len(self._slot)

    def __contains__(self, row: object) -> bool:
        return row in self._slot

    def __iter__(self) -> Iterator[int]:
        return iter(self._slot)

    def weight(self, row: int) -> float:
        return float(self._data[1][self._slot[row]])

    def put(self, row: int, weight: float = 1.0) -> None:
        """Hold `row` with `weight` (replacing the weight it had); weights are positive."""
        if not weight > 0:
            raise ValueError(f"a posting's weight must be positive, not {weight}")
        rows, weights, size, dead = self._data
        at = self._slot.get(row)
        if at is not None:
            weights[at] = weight
            return
        if size == rows.size:
            rows, weights = _resized(rows, weights, size, 2 * rows.size)
        rows[size] = row
        weights[size] = weight
        self._slot[row] = size
        self._data = (rows, weights, size + 1, dead)

    def drop(self, row: int) -> None:
        at = self._slot.pop(row, None)
        if at is None:
            return
        rows, weights, size, dead = self._data
        weights[at] = 0.0
        self._data = (rows, weights, size, dead + 1)
        if size > 2 * _FIRST and 2 * (dead + 1) > size:
            self._compact()

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """The live rows (each once, in the order they were added) and their weights."""
        rows, weights, size, dead = self._data
        if not dead:
            return rows[:size], weights[:size]
        live = weights[:size] > 0
        return rows[:size][live], weights[:size][live]

    def _compact(self) -> None:
        rows, weights, size, _ = self._data
        keep = np.fromiter(sorted(self._slot.values()), dtype=np.int64, count=len(self._slot))
        new_rows, new_weights = _resized(rows[keep], weights[keep], keep.size, 2 * keep.size)
        self._slot = {int(r): i for i, r in enumerate(new_rows[: keep.size])}
        self._data = (new_rows, new_weights, keep.size, 0)


def _resized(
    rows: np.ndarray, weights: np.ndarray, size: int, capacity: int
) -> tuple[np.ndarray, np.ndarray]:
    capacity = max(capacity, _FIRST)
    new_rows = np.empty(capacity, dtype=np.int64)
    new_weights = np.empty(capacity, dtype=np.float32)
    new_rows[:size] = rows[:size]
    new_weights[:size] = weights[:size]
    return new_rows, new_weights
