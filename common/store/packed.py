"""A kind's records by row, read from a saved index one row at a time, when first used.

A saved index of 100k facts spent about 3.4 s of its 4.4 s load turning every fact back into
its objects (a fact, its time, its source, their lists and dates), although a question reads
a few hundred of them. So a saved index keeps each record as its own pickle, and a loaded
index holds those bytes until a row is read: the first read of a row unpickles it and keeps
the record in its place. Anything that reads every row (a listing, an erasure, the graph's
turn edges after a write) pays for the rows it reads, once.

Records are pickled one by one, so what many of them share would be copied into each: the
few `MemoryVersion`s that built a space are written as their key and read back as the
process's one instance of each (`common.models.memory.interned`).
"""

from __future__ import annotations

import io
import pickle
import threading
from collections.abc import Iterator
from functools import lru_cache
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from common.models.memory import MemoryVersion, interned

R = TypeVar("R", bound=BaseModel)


class Records(Generic[R]):
    """The records of one kind by row; a row is a record, None (removed), or, in an index
    read from its saved copy and not read since, the record's pickle."""

    def __init__(self) -> None:
        self._rows: list[R | bytes | None] = []
        self._lock = threading.Lock()  # a writer's record is never replaced by a late read

    def __len__(self) -> int:
        return len(self._rows)

    def __getitem__(self, row: int) -> R:
        item = self._rows[row]
        if isinstance(item, bytes):
            return self._unpack(row, item)
        return item  # type: ignore[return-value]  # None where removed, as the list held

    def __setitem__(self, row: int, record: R | None) -> None:
        with self._lock:
            self._rows[row] = record

    def append(self, record: R) -> None:
        with self._lock:
            self._rows.append(record)

    def __iter__(self) -> Iterator[R]:
        for row in range(len(self._rows)):
            yield self[row]

    def packed(self) -> int:
        """How many rows are still packed (not read since the index was loaded)."""
        return sum(isinstance(item, bytes) for item in self._rows)

    def _unpack(self, row: int, raw: bytes) -> R:
        record: R = _Unpacker(io.BytesIO(raw)).load()
        with self._lock:
            now = self._rows[row]
            if now is raw:
                self._rows[row] = record
                return record
        return self[row]  # written (or read by another thread) meanwhile: that one counts

    def __getstate__(self) -> list[bytes | None]:
        buffer = io.BytesIO()
        packer = _Packer(buffer, protocol=5)
        with self._lock:
            rows = list(self._rows)
        state: list[bytes | None] = []
        for item in rows:
            if item is None or isinstance(item, bytes):
                state.append(item)
                continue
            buffer.seek(0)
            buffer.truncate()
            packer.clear_memo()
            packer.dump(item)
            state.append(buffer.getvalue())
        return state

    def __setstate__(self, state: list[bytes | None]) -> None:
        self._rows = list(state)
        self._lock = threading.Lock()


class _Packer(pickle.Pickler):
    def persistent_id(self, obj: Any) -> Any:
        if isinstance(obj, MemoryVersion):
            return obj.model_dump_json()
        return None


class _Unpacker(pickle.Unpickler):
    def persistent_load(self, pid: Any) -> Any:
        return _version(pid)


@lru_cache(maxsize=256)
def _version(saved: str) -> MemoryVersion | None:
    return interned(MemoryVersion.model_validate_json(saved))
