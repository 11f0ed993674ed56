"""Each coordination role (jobs, sequence, chunks, locks, versions, waits) on both backends:
the SQLite journal of the embedded mode and Redis (skipped when Redis is not running)."""

from __future__ import annotations

import os
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from common.models.jobs import Job
from common.store import keys
from common.store.coordination import Coordination
from common.store.coordination.locks import SqliteLocks

REDIS_URL = "redis://127.0.0.1:6379/13"  # not flushed: each test uses its own tenant

Opener = Callable[[], Coordination]


def _job(tenant: str, job_id: str = "j1") -> Job:
    now = time.time()
    return Job(
        job_id=job_id, tenant=tenant, space="s", session_id="a", created_at=now, updated_at=now
    )


def _redis_or_skip() -> redis.Redis:
    client = redis.Redis.from_url(REDIS_URL, decode_responses=True)
    try:
        client.ping()
    except redis.ConnectionError:
        client.close()
        if os.environ.get("CI") == "true":
            pytest.fail("Redis is not running on 127.0.0.1:6379 (required in CI)")
        pytest.skip("Redis is not running on 127.0.0.1:6379")
    return client


def _forget_tenant(client: redis.Redis, tenant: str) -> None:
    """Delete the test tenant's keys (and its queues' samples), leaving every other key."""
    for pattern in (f"atommem:*:{tenant}:*", keys.queue_wait(f"{tenant}-*")):
        for key in client.scan_iter(pattern):
            client.delete(key)
    for member in client.smembers(keys.OPEN_JOBS):
        if str(member).startswith(f"{tenant}\x1f"):
            client.srem(keys.OPEN_JOBS, member)


@pytest.fixture
def tenant() -> str:
    return f"test-{uuid.uuid4().hex}"


@pytest.fixture(params=["sqlite", pytest.param("redis", marks=pytest.mark.integration)])
def opener(request: pytest.FixtureRequest, tmp_path: Path, tenant: str) -> Iterator[Opener]:
    """Opens the backend afresh on each call (a reopen sees what an earlier process left)."""
    opened: list[Coordination] = []
    client = _redis_or_skip() if request.param == "redis" else None

    def open_one() -> Coordination:
        if client is None:
            coord = Coordination.sqlite(tmp_path / "c.sqlite")
        else:
            coord = Coordination.redis(REDIS_URL, 3600)
        opened.append(coord)
        return coord

    yield open_one
    for coord in opened:
        coord.close()
    if client is not None:
        _forget_tenant(client, tenant)
        client.close()


def test_head_is_the_lowest_seq_whatever_the_registration_order(
    opener: Opener, tenant: str
) -> None:
    c = opener().sequence
    for session, seq in (("s3", 3), ("s1", 1), ("s2", 2)):
        c.register(tenant, "x", session, seq)
    assert c.head(tenant, "x") == "s1"
    assert c.pending(tenant, "x") == ["s1", "s2", "s3"]
    c.unregister(tenant, "x", "s1")
    assert c.head(tenant, "x") == "s2"
    assert c.head(tenant, "other") is None
    c.forget(tenant, "x")
    assert c.pending(tenant, "x") == []


def test_lock_is_exclusive_until_released_by_its_owner_or_expired(
    opener: Opener, tenant: str
) -> None:
    c = opener().locks
    assert c.acquire(tenant, "x", "a", 60_000)
    assert not c.acquire(tenant, "x", "b", 60_000)
    c.release(tenant, "x", "b")  # not the owner: nothing happens
    assert not c.acquire(tenant, "x", "b", 60_000)
    c.release(tenant, "x", "a")
    assert c.acquire(tenant, "x", "b", 1)
    time.sleep(0.01)
    assert c.acquire(tenant, "x", "c", 60_000)  # the expired lock is taken over


def test_versions_and_jobs_survive_a_reopen(opener: Opener, tenant: str) -> None:
    c = opener()
    assert c.versions.version(tenant, "x") == 0
    assert [c.versions.bump_version(tenant, "x") for _ in range(3)] == [1, 2, 3]
    c.jobs.put_job(_job(tenant), '{"payload": 1}')
    c.jobs.update_job(tenant, "j1", state="extracting")
    c.jobs.put_job(_job(tenant, "j2"), "{}")
    c.jobs.update_job(tenant, "j2", state="failed", reason="bad")
    c.close()
    again = opener()
    assert again.versions.version(tenant, "x") == 3
    assert [j.job_id for j in again.jobs.open_jobs() if j.tenant == tenant] == ["j1"]
    assert again.jobs.get_job(tenant, "j2").reason == "bad"  # type: ignore[union-attr]
    assert again.jobs.job_payload(tenant, "j1") == '{"payload": 1}'
    assert again.jobs.update_job(tenant, "missing", state="done") is None


def test_a_deleted_job_and_a_forgotten_version_are_gone(opener: Opener, tenant: str) -> None:
    c = opener()
    c.jobs.put_job(_job(tenant), "{}")
    c.jobs.delete_job(tenant, "j1")
    assert c.jobs.get_job(tenant, "j1") is None
    assert c.jobs.job_payload(tenant, "j1") is None
    assert all(j.tenant != tenant for j in c.jobs.open_jobs())
    c.versions.bump_version(tenant, "x")
    c.versions.forget(tenant, "x")
    assert c.versions.version(tenant, "x") == 0


def test_a_parked_chunk_counts_once(opener: Opener, tenant: str) -> None:
    c = opener().chunks
    assert c.put_chunk(tenant, "x", "s1", 2, 3, "third") == 1
    assert c.put_chunk(tenant, "x", "s1", 0, 3, "first") == 2
    assert c.put_chunk(tenant, "x", "s1", 0, 3, "first") == 2  # redelivered
    assert c.parked(tenant, "x", "s1") == {0: 3, 2: 3}
    assert c.get_chunks(tenant, "x", "s1") == {0: "first", 2: "third"}
    assert c.parked(tenant, "x", "s2") == {}
    c.drop_chunks(tenant, "x", "s1")
    assert c.get_chunks(tenant, "x", "s1") == {}


def test_wait_samples_are_kept_per_queue(opener: Opener, tenant: str) -> None:
    c = opener().waits
    queue = f"{tenant}-ingest"  # queue names are global: one of this test's own
    c.record_wait(queue, 0.25)
    c.record_wait(queue, 1.5)
    assert sorted(c.waits(queue)) == [0.25, 1.5]
    assert c.waits(f"{tenant}-other") == []


def test_a_new_embedded_process_clears_locks_left_by_a_dead_one(tmp_path: Path) -> None:
    locks = Coordination.sqlite(tmp_path / "c.sqlite").locks
    assert isinstance(locks, SqliteLocks)
    assert locks.acquire("t", "x", "dead-process", 600_000)
    locks.clear_locks()
    assert locks.acquire("t", "x", "new-process", 600_000)


# The journal's tables as the single-module coordinator wrote them: files from before the
# split into roles must open unchanged.
_EARLIER_SCHEMA = """
PRAGMA journal_mode=WAL;
CREATE TABLE jobs (tenant TEXT, job_id TEXT, body TEXT, payload TEXT,
    open INTEGER, PRIMARY KEY (tenant, job_id));
CREATE TABLE pending (tenant TEXT, space TEXT, session_id TEXT,
    seq INTEGER, PRIMARY KEY (tenant, space, session_id));
CREATE TABLE parked_chunks (tenant TEXT, space TEXT,
    session_id TEXT, chunk INTEGER, of INTEGER, data TEXT,
    PRIMARY KEY (tenant, space, session_id, chunk));
CREATE TABLE locks (tenant TEXT, space TEXT, token TEXT,
    expires REAL, PRIMARY KEY (tenant, space));
CREATE TABLE versions (tenant TEXT, space TEXT, v INTEGER,
    PRIMARY KEY (tenant, space));
CREATE TABLE waits (queue TEXT, seconds REAL);
"""


def test_a_journal_written_before_the_split_opens_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "coordination.sqlite"
    with sqlite3.connect(path) as db:
        db.executescript(_EARLIER_SCHEMA)
        db.execute(
            "INSERT INTO jobs VALUES (?, ?, ?, ?, 1)",
            ("t", "j1", _job("t").model_dump_json(), '{"p": 1}'),
        )
        db.execute("INSERT INTO pending VALUES ('t', 's', 'a', 4)")
        db.execute("INSERT INTO parked_chunks VALUES ('t', 's', 'a', 0, 2, 'd0')")
        db.execute("INSERT INTO versions VALUES ('t', 's', 7)")
        db.execute("INSERT INTO waits VALUES ('ingest', 0.5)")
    db.close()
    c = Coordination.sqlite(path)
    assert [j.job_id for j in c.jobs.open_jobs()] == ["j1"]
    assert c.jobs.job_payload("t", "j1") == '{"p": 1}'
    assert c.sequence.head("t", "s") == "a"
    assert c.chunks.get_chunks("t", "s", "a") == {0: "d0"}
    assert c.versions.bump_version("t", "s") == 8
    assert c.waits.waits("ingest") == [0.5]
    assert c.locks.acquire("t", "s", "new", 1000)
    c.close()
