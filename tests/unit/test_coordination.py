"""Each coordination role (jobs, sequence, chunks, locks, versions, waits) on both backends:
the SQLite journal of the embedded mode and Redis (skipped when Redis is not running)."""

from __future__ import annotations

import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from common.models.jobs import Job
from common.store.coordination.jobs import RedisJobs
from common.store.coordination.locks import LockLost, SqliteLocks, space_lock
from common.store.coordination.roles import Coordination
from tests.helpers.redis import forget_tenant, redis_or_skip, shared_url, unreachable_url

REDIS_URL = shared_url(__name__)  # not flushed: each test uses its own tenant

Opener = Callable[[], Coordination]


def _job(tenant: str, job_id: str = "j1") -> Job:
    now = time.time()
    return Job(
        job_id=job_id, tenant=tenant, space="s", session_id="a", created_at=now, updated_at=now
    )


@pytest.fixture
def tenant() -> str:
    return f"test-{uuid.uuid4().hex}"


@pytest.fixture(params=["sqlite", pytest.param("redis", marks=pytest.mark.integration)])
def opener(request: pytest.FixtureRequest, tmp_path: Path, tenant: str) -> Iterator[Opener]:
    """Opens the backend afresh on each call (a reopen sees what an earlier process left)."""
    opened: list[Coordination] = []
    client = redis_or_skip(REDIS_URL, decode_responses=True) if request.param == "redis" else None

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
        forget_tenant(client, tenant)
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
    dead = opener()  # a holder that stops renewing (its process died) loses the lock
    assert dead.locks.acquire(tenant, "x", "b", 200)
    dead.close()
    time.sleep(0.4)
    assert c.acquire(tenant, "x", "c", 60_000)  # the expired lock is taken over


def test_a_held_lock_outlives_its_ttl_while_its_holder_lives(opener: Opener, tenant: str) -> None:
    c = opener().locks
    assert c.acquire(tenant, "x", "a", 300)
    time.sleep(1.0)  # more than three TTLs: renewed all along
    assert c.held(tenant, "x")
    assert not c.acquire(tenant, "x", "b", 300)
    c.release(tenant, "x", "a")
    assert not c.held(tenant, "x")
    assert c.acquire(tenant, "x", "b", 300)


def test_a_space_lock_is_given_back_however_its_block_ends(opener: Opener, tenant: str) -> None:
    c = opener().locks
    with space_lock(c, tenant, "x", 60_000) as held:
        assert held is not None and c.holds(tenant, "x", held.token)
        with space_lock(c, tenant, "x", 60_000) as other:
            assert other is None  # held: the caller tries again later
        held.check()
    assert not c.held(tenant, "x")
    with pytest.raises(LockLost), space_lock(c, tenant, "x", 60_000) as held:
        assert held is not None
        c.release(tenant, "x", held.token)  # as if it lapsed and another took the space
        assert c.acquire(tenant, "x", "successor", 60_000)
        held.check()
    assert c.holds(tenant, "x", "successor")  # the block's release left the successor alone
    c.release(tenant, "x", "successor")
    with pytest.raises(RuntimeError), space_lock(c, tenant, "x", 60_000):
        raise RuntimeError("the work failed")
    assert not c.held(tenant, "x")


def test_a_lock_held_past_its_maximum_is_no_longer_renewed(tmp_path: Path, tenant: str) -> None:
    c = Coordination.sqlite(tmp_path / "c.sqlite", max_hold_s=0.3)
    assert c.locks.acquire(tenant, "x", "hung", 300)
    time.sleep(1.0)  # a task hung past the maximum hold: its lock lapses
    assert c.locks.acquire(tenant, "x", "next", 300)
    c.close()


def test_a_claimed_job_is_never_replaced(opener: Opener, tenant: str) -> None:
    c = opener()
    first = _job(tenant)
    assert c.jobs.claim_job(first, '{"v": 1}') is None
    second = first.model_copy(update={"state": "extracting", "created_at": 1.0})
    found = c.jobs.claim_job(second, '{"v": 2}')
    assert found is not None
    assert found[0] == first and found[1] == '{"v": 1}'
    assert c.jobs.job_payload(tenant, "j1") == '{"v": 1}'
    assert c.jobs.get_job(tenant, "j1") == first


def test_of_concurrent_claims_exactly_one_stores(opener: Opener, tenant: str) -> None:
    stores = [opener().jobs for _ in range(8)]
    barrier = threading.Barrier(len(stores))
    results: list[tuple[Job, str] | None] = [None] * len(stores)

    def claim(i: int) -> None:
        barrier.wait()
        results[i] = stores[i].claim_job(_job(tenant), f'{{"v": {i}}}')

    threads = [threading.Thread(target=claim, args=(i,)) for i in range(len(stores))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [i for i, r in enumerate(results) if r is None]
    assert len(winners) == 1
    assert stores[0].job_payload(tenant, "j1") == f'{{"v": {winners[0]}}}'


def test_stalled_jobs_are_open_ones_without_progress(opener: Opener, tenant: str) -> None:
    c = opener().jobs
    old = _job(tenant, "old").model_copy(update={"updated_at": time.time() - 100})
    c.put_job(old, "{}")
    c.put_job(_job(tenant, "fresh"), "{}")
    c.put_job(_job(tenant, "done").model_copy(update={"updated_at": time.time() - 100}), "{}")
    c.update_job(tenant, "done", state="done")

    def stalled() -> list[str]:
        return [j.job_id for j, _ in c.stalled(time.time() - 50) if j.tenant == tenant]

    assert stalled() == ["old"]
    c.touch(tenant, ["old"])  # a task working on it is alive
    assert stalled() == []


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


def test_finished_jobs_are_read_many_at_once(opener: Opener, tenant: str) -> None:
    c = opener()
    ids = [f"j{i}" for i in range(1203)]  # more than one MGET's (and SQLite IN's) worth
    for job_id in ids[:1200]:
        c.jobs.put_job(_job(tenant, job_id), "{}")
    assert c.jobs.finished_jobs(tenant, ids) == {}  # all still open
    ended = ids[::7]
    for n, job_id in enumerate(ended):
        c.jobs.update_job(tenant, job_id, state="done" if n % 2 else "failed", reason="x")
    found = c.jobs.finished_jobs(tenant, ids)
    assert sorted(found) == sorted(j for j in ended if j in ids[:1200])
    assert all(found[j].job_id == j and found[j].state in ("done", "failed") for j in found)
    assert c.jobs.finished_jobs(tenant, []) == {}


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


def test_a_failed_or_done_job_goes_back_to_work_only_when_reopened(
    opener: Opener, tenant: str
) -> None:
    c = opener()
    c.jobs.put_job(_job(tenant), "{}")
    c.jobs.cancel_job(tenant, "j1", "erased")
    late = c.jobs.update_job(tenant, "j1", state="extracting", reason=None)  # a late task
    assert late is not None and (late.state, late.reason) == ("failed", "erased")
    assert c.jobs.job_payload(tenant, "j1") is None
    assert all(j.job_id != "j1" or j.tenant != tenant for j in c.jobs.open_jobs())
    again = c.jobs.update_job(tenant, "j1", reopen=True, state="queued", reason=None)
    assert again is not None and (again.state, again.reason) == ("queued", None)
    c.jobs.update_job(tenant, "j1", state="done")
    kept = c.jobs.update_job(tenant, "j1", state="committing")
    assert kept is not None and kept.state == "done"
    marked = c.jobs.update_job(tenant, "j1", unchanged=True)  # a finished job's own fields
    assert marked is not None and marked.state == "done" and marked.unchanged


def test_recent_jobs_are_the_tenants_newest_first_and_forget_deleted_ones(
    opener: Opener, tenant: str
) -> None:
    c = opener()
    for n, space in enumerate(["a", "b", "a", "b", "a"]):
        job = _job(tenant, f"j{n}").model_copy(update={"space": space, "created_at": 100.0 + n})
        if n % 2:
            c.jobs.put_job(job, "{}")
        else:
            assert c.jobs.claim_job(job, "{}") is None
    other = _job(f"{tenant}-other", "x").model_copy(update={"created_at": 200.0})
    c.jobs.put_job(other, "{}")
    assert [j.job_id for j in c.jobs.recent_jobs(tenant, None, 10)] == [
        "j4", "j3", "j2", "j1", "j0"
    ]  # fmt: skip
    assert [j.job_id for j in c.jobs.recent_jobs(tenant, "a", 2)] == ["j4", "j2"]
    c.jobs.delete_job(tenant, "j4")
    c.jobs.update_job(tenant, "j2", state="done")
    again = opener().jobs.recent_jobs(tenant, "a", 10)
    assert [(j.job_id, j.state) for j in again] == [("j2", "done"), ("j0", "queued")]
    c.jobs.delete_job(f"{tenant}-other", "x")


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
    assert c.waits(queue) == [1.5, 0.25]  # newest first
    assert c.waits(f"{tenant}-other") == []


def test_the_embedded_wait_samples_keep_only_the_latest() -> None:
    from common.store.coordination.waits import LocalWaits

    kept = LocalWaits(limit=3)
    for seconds in (1.0, 2.0, 3.0, 4.0):
        kept.record_wait("ingest", seconds)
    assert kept.waits("ingest") == [4.0, 3.0, 2.0]


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
    assert c.waits.waits("ingest") == []  # samples live in the process now
    assert c.locks.acquire("t", "s", "new", 1000)
    c.close()
    with sqlite3.connect(path) as db:  # and the table that only grew is gone from the file
        assert db.execute("SELECT name FROM sqlite_master WHERE name='waits'").fetchall() == []
    db.close()


def test_a_release_while_redis_is_away_is_retried_not_raised() -> None:
    from common.store.coordination.locks import RedisLocks, Renewer

    # a port nothing listens on: Redis is away
    away = RedisLocks(redis.Redis.from_url(unreachable_url(), socket_connect_timeout=0.2))
    away.release("t", "x", "a")  # the task that held it does not fail for it
    away.close()

    calls: list[str] = []

    def give_back(tenant: str, space: str, token: str) -> None:
        calls.append(token)
        if len(calls) < 3:
            raise redis.ConnectionError("Redis is restarting")

    renewer = Renewer(lambda *_: True, give_back, 60)
    renewer.release_later("t", "x", "a")
    deadline = time.monotonic() + 10
    while len(calls) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.6)
    renewer.close()
    assert calls == ["a", "a", "a"]  # retried until it answered, then no more


@pytest.mark.integration
def test_each_resend_without_progress_doubles_the_wait(opener: Opener, tenant: str) -> None:
    c = opener().jobs
    if not isinstance(c, RedisJobs):
        pytest.skip("the sweep runs with Redis only")
    c.put_job(_job(tenant).model_copy(update={"updated_at": time.time() - 100}), "{}")

    def stalled_after(seconds: float) -> bool:
        found = c.stalled(time.time() + seconds - 10)  # stale after 10 s of no progress
        return any(j.tenant == tenant for j, _ in found)

    assert stalled_after(0)
    c.note_resent(tenant, "j1", 10)  # first resend: due again after 10 s
    assert not stalled_after(9) and stalled_after(11)
    c.note_resent(tenant, "j1", 10)  # no progress since: after 20 s
    assert not stalled_after(19) and stalled_after(21)
    c.note_resent(tenant, "j1", 10)
    assert not stalled_after(39) and stalled_after(41)
    # The resent accept puts the job back in the state it had: no progress, the wait stays.
    c.update_job(tenant, "j1", state=c.get_job(tenant, "j1").state)  # type: ignore[union-attr]
    c.note_resent(tenant, "j1", 10)
    assert not stalled_after(79) and stalled_after(81)
    c.update_job(tenant, "j1", state="committing")  # real progress: back to 10 s
    c.note_resent(tenant, "j1", 10)
    assert not stalled_after(9) and stalled_after(11)
