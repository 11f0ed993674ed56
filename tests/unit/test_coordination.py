"""Sequencing, locks, versions and job state of the embedded (SQLite) coordinator."""

from __future__ import annotations

import time
from pathlib import Path

from common.models.jobs import Job
from common.store.coordination import SqliteCoordinator


def _job(job_id: str = "j1") -> Job:
    now = time.time()
    return Job(job_id=job_id, tenant="t", space="s", session_id="a", created_at=now, updated_at=now)


def test_head_is_the_lowest_seq_whatever_the_registration_order(tmp_path: Path) -> None:
    c = SqliteCoordinator(tmp_path / "c.sqlite")
    for session, seq in (("s3", 3), ("s1", 1), ("s2", 2)):
        c.register("t", "x", session, seq)
    assert c.head("t", "x") == "s1"
    c.unregister("t", "x", "s1")
    assert c.head("t", "x") == "s2"
    assert c.head("t", "other") is None


def test_lock_is_exclusive_until_released_by_its_owner_or_expired(tmp_path: Path) -> None:
    c = SqliteCoordinator(tmp_path / "c.sqlite")
    assert c.acquire("t", "x", "a", 60_000)
    assert not c.acquire("t", "x", "b", 60_000)
    c.release("t", "x", "b")  # not the owner: nothing happens
    assert not c.acquire("t", "x", "b", 60_000)
    c.release("t", "x", "a")
    assert c.acquire("t", "x", "b", 1)
    time.sleep(0.01)
    assert c.acquire("t", "x", "c", 60_000)  # the expired lock is taken over


def test_versions_and_jobs_survive_a_reopen(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    c = SqliteCoordinator(path)
    assert c.version("t", "x") == 0
    assert [c.bump_version("t", "x") for _ in range(3)] == [1, 2, 3]
    c.put_job(_job(), '{"payload": 1}')
    c.update_job("t", "j1", state="extracting")
    c.put_job(_job("j2"), "{}")
    c.update_job("t", "j2", state="failed", reason="bad")
    c.close()
    again = SqliteCoordinator(path)
    assert again.version("t", "x") == 3
    assert [j.job_id for j in again.open_jobs()] == ["j1"]
    assert again.get_job("t", "j2").reason == "bad"  # type: ignore[union-attr]
    assert again.job_payload("t", "j1") == '{"payload": 1}'
    assert again.update_job("t", "missing", state="done") is None


def test_a_new_embedded_process_clears_locks_left_by_a_dead_one(tmp_path: Path) -> None:
    c = SqliteCoordinator(tmp_path / "c.sqlite")
    assert c.acquire("t", "x", "dead-process", 600_000)
    c.clear_locks()
    assert c.acquire("t", "x", "new-process", 600_000)
