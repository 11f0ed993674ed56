"""Parked model calls beside a session's parked chunks (the embedded SQLite journal): they
never count as chunks, are read per chunk or all, and go with a chunk or the session."""

from __future__ import annotations

from pathlib import Path

from common.store.coordination.chunks import SqliteChunks
from common.store.coordination.journal import Journal

T, S, SID = "t", "sp", "s1"


def test_parked_calls_are_no_chunks_and_go_with_them(tmp_path: Path) -> None:
    chunks = SqliteChunks(Journal(tmp_path / "c.sqlite"))
    chunks.put_call(T, S, SID, 0, "d0", '{"a": 0}')
    chunks.put_call(T, S, SID, 1, "d1", '{"a": 1}')
    chunks.put_call(T, S, SID, 1, "d1", '{"a": 2}')  # the same call kept again: once
    assert chunks.parked(T, S, SID) == {}
    assert chunks.put_chunk(T, S, SID, 0, 2, "drafts") == 1
    assert chunks.get_chunks(T, S, SID) == {0: "drafts"}
    assert chunks.get_calls(T, S, SID) == {(0, "d0"): '{"a": 0}', (1, "d1"): '{"a": 2}'}
    assert chunks.get_calls(T, S, SID, chunk=1) == {(1, "d1"): '{"a": 2}'}
    chunks.drop_chunk(T, S, SID, 0)
    assert chunks.get_calls(T, S, SID) == {(1, "d1"): '{"a": 2}'}
    chunks.drop_chunks(T, S, SID)
    assert chunks.get_calls(T, S, SID) == {}
