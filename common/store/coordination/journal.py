"""The SQLite journal the embedded roles share: one connection, one lock, one file.

Deleted rows leave no bytes behind: `secure_delete` overwrites them (and the freed pages) in
the pages written, and `scrub` (after an erasure) checkpoints the write-ahead log into the
file and truncates it, so the log's older copies of those pages go too."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


class Journal:
    """One SQLite file in WAL mode, used from the embedded worker's threads in turn."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._lock = threading.Lock()
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA secure_delete=ON")

    def create(self, ddl: str) -> None:
        """Create a role's table if the file does not have it yet."""
        with self._lock:
            self._db.execute(ddl)

    @contextmanager
    def locked(self) -> Iterator[sqlite3.Connection]:
        """The connection, held for a read-then-write that must not interleave."""
        with self._lock:
            yield self._db

    def one(self, sql: str, *args: Any) -> Any:
        """The first column of the first row, or None."""
        with self._lock:
            row = self._db.execute(sql, args).fetchone()
        return row[0] if row else None

    def rows(self, sql: str, *args: Any) -> list[Any]:
        with self._lock:
            return self._db.execute(sql, args).fetchall()

    def run(self, sql: str, *args: Any) -> None:
        with self._lock:
            self._db.execute(sql, args)

    def scrub(self) -> None:
        """After an erasure: the log's pages into the file, the log emptied (no reader
        holds it: this is the only connection)."""
        with self._lock:
            busy, _, _ = self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        if busy:
            raise sqlite3.OperationalError("the journal's log could not be truncated (busy)")

    def close(self) -> None:
        with self._lock:
            self._db.close()
