"""Parked model calls beside a session's parked chunks (the embedded SQLite journal): they
never count as chunks, are read per chunk or all, go with a chunk or the session, are
kept per chunk, and are parked only while their job holds its payload (not erased)."""

from __future__ import annotations

import time
from pathlib import Path

from common.models.jobs import Job
from common.store.coordination.chunks import SqliteChunks
from common.store.coordination.jobs import SqliteJobs
from common.store.coordination.journal import Journal

T, S, SID, JOB = "t", "sp", "s1", "j1"


def _parking(tmp_path: Path) -> tuple[SqliteJobs, SqliteChunks]:
    journal = Journal(tmp_path / "c.sqlite")
    jobs = SqliteJobs(journal)
    now = time.time()
    job = Job(job_id=JOB, tenant=T, space=S, session_id=SID, created_at=now, updated_at=now)
    jobs.put_job(job, '{"session": "raw"}')
    return jobs, SqliteChunks(journal)


def test_parked_calls_are_no_chunks_and_go_with_them(tmp_path: Path) -> None:
    _, chunks = _parking(tmp_path)
    assert chunks.put_call(T, S, SID, 0, "d0", '{"a": 0}', job_id=JOB)
    chunks.put_call(T, S, SID, 1, "d1", '{"a": 1}', job_id=JOB)
    chunks.put_call(T, S, SID, 1, "d1", '{"a": 2}', job_id=JOB)  # the same call again: once
    assert chunks.parked(T, S, SID) == {}
    assert chunks.put_chunk(T, S, SID, 0, 2, "drafts") == 1
    assert chunks.get_chunks(T, S, SID) == {0: "drafts"}
    assert chunks.get_calls(T, S, SID) == {(0, "d0"): '{"a": 0}', (1, "d1"): '{"a": 2}'}
    assert chunks.get_calls(T, S, SID, chunk=1) == {(1, "d1"): '{"a": 2}'}
    chunks.drop_chunk(T, S, SID, 0)
    assert chunks.get_calls(T, S, SID) == {(1, "d1"): '{"a": 2}'}
    chunks.drop_chunks(T, S, SID)
    assert chunks.get_calls(T, S, SID) == {}


def test_two_chunks_asking_the_same_call_each_keep_it(tmp_path: Path) -> None:
    _, chunks = _parking(tmp_path)
    chunks.put_call(T, S, SID, 0, "same", '{"a": 0}', job_id=JOB)
    chunks.put_call(T, S, SID, 1, "same", '{"a": 1}', job_id=JOB)
    assert chunks.get_calls(T, S, SID) == {(0, "same"): '{"a": 0}', (1, "same"): '{"a": 1}'}
    chunks.drop_chunk(T, S, SID, 1)  # chunk 1 parked: chunk 0 still replays its call
    assert chunks.get_calls(T, S, SID, chunk=0) == {(0, "same"): '{"a": 0}'}


def test_a_call_returning_after_its_job_was_erased_parks_nothing(tmp_path: Path) -> None:
    jobs, chunks = _parking(tmp_path)
    chunks.put_call(T, S, SID, 0, "d0", '{"a": 0}', job_id=JOB)
    jobs.cancel_job(T, JOB, "erased")  # the erasure: the payload goes, then the parked calls
    chunks.drop_chunks(T, S, SID)
    assert not chunks.put_call(T, S, SID, 0, "d1", '{"a": 1}', job_id=JOB)
    assert not chunks.put_call(T, S, SID, 0, "d2", '{"a": 2}', job_id="never-accepted")
    assert chunks.get_calls(T, S, SID) == {}


def test_a_journal_keyed_by_digest_alone_is_keyed_by_chunk_too(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "c.sqlite")
    journal.create(
        "CREATE TABLE parked_calls (tenant TEXT, space TEXT, session_id TEXT, chunk INTEGER,"
        " digest TEXT, data TEXT, PRIMARY KEY (tenant, space, session_id, digest))"
    )
    journal.close()
    _, chunks = _parking(tmp_path)
    chunks.put_call(T, S, SID, 0, "same", "a", job_id=JOB)
    chunks.put_call(T, S, SID, 1, "same", "b", job_id=JOB)
    assert chunks.get_calls(T, S, SID) == {(0, "same"): "a", (1, "same"): "b"}
