"""Faults with the shipped defaults: a worker SIGKILLed mid-ingest, Redis killed (-9) and
restarted mid-ingest, conflicting and concurrent resubmissions. Each test runs its own
`redis-server` (AOF everysec, as deployed) and real `celery worker` processes.

Recovery times are printed (run with `-s` to see them); the bounds asserted are far below
what the broker's visibility timeout (3,600 s) or the old lock TTL (400 s) would take.
"""

from __future__ import annotations

import contextlib
import os
import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from celery import Celery

from common.celery_config import celery_config
from common.errors import SessionConflict
from common.inputs.formats import read_sessions
from common.models.jobs import Job
from common.models.session import SessionInput, Turn
from common.producer import Producer
from common.settings import BrokerSettings, Settings, StoreSettings
from common.store import keys, records
from common.store.backends import open_store
from common.store.coordination.roles import Coordination
from tests.helpers.redis_server import RedisServer, start_redis
from tests.helpers.samples import SAMPLE
from tests.helpers.workers import ALL_QUEUES
from tests.helpers.workers import producer as bare_producer
from workers.launch import WorkerProcess

pytestmark = pytest.mark.integration


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    srv = start_redis(tmp_path / "redis")
    yield srv
    srv.stop()


def shipped_env(url: str, data: Path) -> dict[str, str]:
    """The shipped defaults: no ATOMMEM_BROKER__* but the URL (unlike the other tests'
    shortened limits)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ATOMMEM_BROKER__")}
    env["ATOMMEM_BROKER__URL"] = url
    env["ATOMMEM_STORE__QDRANT_PATH"] = str(data / "qdrant")
    return env


def producer(url: str) -> Producer:
    """A producer as the API builds it, keeping jobs as long as the shipped defaults do."""
    return bare_producer(url, Settings().pipeline.job_ttl_s)


def create_space(data: Path, space: str) -> None:
    store = open_store(StoreSettings(qdrant_path=data / "qdrant"), 384)
    records.create_space(store, "default", space)
    store.close()


def backlog(path: Path, seed: int) -> list[tuple[str, SessionInput]]:
    data = read_sessions(path)
    assert data.space
    items = [(data.space, s) for s in data.sessions]
    random.Random(seed).shuffle(items)
    return items


def states(client: Producer, ids: list[str]) -> list[str]:
    return [client.job("default", j).state for j in ids]


def wait_until(check: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"{what}: not within {timeout}s"
        time.sleep(0.05)


def assert_counts_right(jobs: list[Job], items: list[tuple[str, SessionInput]]) -> None:
    """Every job reports its own session's turns and facts, however it was recovered."""
    by_session = {s.session_id: s for _, s in items}
    for job in jobs:
        session = by_session[job.session_id]
        facts = sum(len(t.facts or []) for t in session.turns)
        assert job.counts.get("turns") == len(session.turns), job
        assert job.counts.get("facts_in") == facts, job


def test_worker_sigkilled_mid_commit_resumes_within_a_minute_with_shipped_defaults(
    tmp_path: Path, server: RedisServer, locomo: Path
) -> None:
    items = backlog(locomo / "atommem_facts" / "conv-30.json", seed=5)
    create_space(tmp_path, "conv-30")
    env = shipped_env(server.url(), tmp_path)
    first = WorkerProcess(env, tmp_path / "worker1.log", ALL_QUEUES)
    first.wait_ready()
    client = producer(server.url())
    ids = [j.job_id for j in client.submit_many("default", items)]
    probe = server.client()
    lock = keys.lock("default", "conv-30")

    def committing() -> bool:  # the kill must land while a commit holds the space's lock
        return states(client, ids).count("done") >= 3 and bool(probe.exists(lock))

    wait_until(committing, 300, "a commit in progress")
    first.kill()
    killed = time.monotonic()
    open_at_kill = len(ids) - states(client, ids).count("done")
    assert open_at_kill > 0

    second = WorkerProcess(env, tmp_path / "worker2.log", ALL_QUEUES)
    try:
        second.wait_ready()
        started = time.monotonic() - killed
        wait_until(
            lambda: len(ids) - states(client, ids).count("done") < open_at_kill, 120, "resume"
        )
        resumed = time.monotonic() - killed
        finished = client.wait("default", ids, timeout=180)
        recovered = time.monotonic() - killed
    finally:
        second.stop()
    print(
        f"\nSIGKILL mid-commit: new worker ready {started:.1f}s after, first job done "
        f"{resumed:.1f}s after, all {open_at_kill} open jobs done {recovered:.1f}s after"
    )
    assert [j.state for j in finished] == ["done"] * len(ids)
    assert_counts_right(finished, items)
    # With the shipped defaults the space's lock (400 s before) and the broker's visibility
    # timeout (3,600 s) no longer decide: a dead holder's lock lapses within its 30 s TTL
    # and the sweep sends the stalled jobs again.
    assert resumed < 60


def test_redis_killed_mid_ingest_loses_no_job_and_the_producer_recovers(
    tmp_path: Path, server: RedisServer, locomo: Path
) -> None:
    items = backlog(locomo / "atommem_facts" / "conv-30.json", seed=11)
    create_space(tmp_path, "conv-30")
    worker = WorkerProcess(shipped_env(server.url(), tmp_path), tmp_path / "worker.log", ALL_QUEUES)
    try:
        worker.wait_ready()
        client = producer(server.url())
        ids = [j.job_id for j in client.submit_many("default", items)]
        time.sleep(1.5)  # past the AOF's one-second fsync: every submission is durable
        wait_until(lambda: states(client, ids).count("done") >= 3, 300, "ingest under way")
        server.kill()
        time.sleep(1.0)
        server.start()
        restarted = time.monotonic()
        open_at_kill = len(ids) - states(client, ids).count("done")
        created = client.create_space("default", "after-restart", timeout=30)
        answered = time.monotonic() - restarted
        assert created.name == "after-restart"
        finished = client.wait("default", ids, timeout=180)
        recovered = time.monotonic() - restarted
    finally:
        worker.stop()
    print(
        f"\nRedis -9 mid-ingest: producer answered {answered:.1f}s after the restart; "
        f"{open_at_kill} open jobs all done {recovered:.1f}s after"
    )
    lost = [j for j in finished if j.state != "done"]
    assert lost == []
    assert_counts_right(finished, items)


def _variant(session: SessionInput, text: str) -> SessionInput:
    turns = [Turn(id=f"{session.session_id}:x", speaker=session.participants[0], text=text)]
    return session.model_copy(update={"turns": turns})


def test_conflicting_resubmissions_are_refused_and_change_nothing(
    tmp_path: Path, server: RedisServer
) -> None:
    create_space(tmp_path, "demo")
    sessions = read_sessions(SAMPLE).sessions
    worker = WorkerProcess(shipped_env(server.url(), tmp_path), tmp_path / "worker.log", ALL_QUEUES)
    client = producer(server.url())
    try:
        worker.wait_ready()
        original = client.submit("default", "demo", sessions)
        with pytest.raises(SessionConflict, match=original[0].job_id):
            client.submit("default", "demo", [_variant(sessions[0], "Tom sold his car.")])

        # A new session id submitted concurrently with different contents: one wins.
        fresh = _variant(sessions[0], "placeholder").model_copy(update={"session_id": "s9"})
        outcomes: list[Job | None] = [None] * 6
        barrier = threading.Barrier(len(outcomes))

        def submit(i: int) -> None:
            barrier.wait()
            with_text = _variant(fresh, f"Tom adopted a parrot called number {i}.")
            with contextlib.suppress(SessionConflict):
                outcomes[i] = client.submit("default", "demo", [with_text])[0]

        threads = [threading.Thread(target=submit, args=(i,)) for i in range(len(outcomes))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        winners = [i for i, job in enumerate(outcomes) if job is not None]
        assert len(winners) == 1

        ids = [j.job_id for j in original] + [outcomes[winners[0]].job_id]  # type: ignore[union-attr]
        done = client.wait("default", ids, timeout=300)
        assert [j.state for j in done] == ["done"] * len(ids)

        with pytest.raises(SessionConflict, match=r"\(state done\)"):
            client.submit("default", "demo", [_variant(sessions[1], "Priya moved to Paris.")])
        (same,) = client.submit("default", "demo", [sessions[1]])
        after = client.wait("default", ids, timeout=60)
        assert same.job_id == done[1].job_id and same.counts == done[1].counts
        assert [(j.state, j.counts) for j in after] == [(j.state, j.counts) for j in done]
        facts = client.page("default", "demo", "facts", limit=1000).items
        parrots = {f.text for f in facts if "parrot" in f.text}
        assert parrots == {f"Tom adopted a parrot called number {winners[0]}."}
    finally:
        worker.stop()
    leftovers = list(server.client().scan_iter(keys.chunks("default", "demo", "*")))
    assert leftovers == []  # no parked chunk lingers


def _sweep_setup(
    server: RedisServer,
) -> tuple[Settings, Celery, Coordination, Producer]:
    """A producer on the private Redis, and the settings and app a sweeper runs with."""
    settings = Settings(broker=BrokerSettings(url=server.url()))
    app = Celery("sweeper")
    app.conf.update(celery_config(settings))
    coord = Coordination.redis(server.url(), 3600)
    return settings, app, coord, Producer(app, coord.jobs, coord.sequence)


def test_the_sweep_resends_only_jobs_no_queue_or_live_holder_accounts_for(
    tmp_path: Path, server: RedisServer
) -> None:
    from workers.leases import Sweeper

    settings, app, coord, client = _sweep_setup(server)
    now = time.time()
    sessions = read_sessions(SAMPLE).sessions
    ids = {}
    for name, session in zip(("lost", "queued", "locked", "fresh"), sessions, strict=True):
        space = "busy" if name == "locked" else "demo"
        (job,) = client.submit("default", space, [session])
        ids[name] = job.job_id
    r = server.client()
    r.delete("ingest")  # the submissions' messages: gone, as after a crash
    progress = {"lost": now - 100, "queued": now - 60, "locked": now - 100, "fresh": now}
    for name, at in progress.items():
        r.zadd(keys.JOB_PROGRESS, {f"default\x1f{ids[name]}": at})
    # A message still waiting, sent before "queued" last progressed: it may be its own.
    app.send_task(
        "atommem.extract.window", kwargs={"payload": {"enqueued_at": now - 70}}, queue="extract"
    )
    assert coord.locks.acquire("default", "busy", "live-holder", 30_000)

    sweeper = Sweeper(settings, app, "test")
    sent = sweeper.sweep()
    assert {j.job_id for j in sent} == {ids["lost"]}
    assert r.llen("ingest") == 1  # the lost job's accept, sent again
    assert sweeper.sweep() == []  # one round per interval across the workers
    sweeper.stop()
    coord.close()


def test_the_sweep_leaves_sessions_that_wait_their_turn_and_ignores_lane_tasks(
    tmp_path: Path, server: RedisServer
) -> None:
    """A later session of a space has no message anywhere while the head commits: only the
    head is sent again. Interchangeable fair-lane tasks waiting behind a flood name no job and
    do not hold recovery back."""
    from workers.leases import Sweeper
    from workers.tasks.fair import LANE_PRIORITY

    settings, app, coord, client = _sweep_setup(server)
    now = time.time()
    jobs = client.submit("default", "demo", read_sessions(SAMPLE).sessions[:3])
    r = server.client()
    r.delete("ingest")  # the submissions' messages: gone, as after a crash
    for job in jobs:
        r.zadd(keys.JOB_PROGRESS, {f"default\x1f{job.job_id}": now - 100})
    # A flood's lane task, queued long before any of these jobs last progressed.
    app.send_task(
        "atommem.extract.next",
        kwargs={"payload": {"enqueued_at": now - 500}},
        queue="extract",
        priority=LANE_PRIORITY,
    )
    assert r.llen(f"extract\x06\x16{LANE_PRIORITY}") == 1

    sweeper = Sweeper(settings, app, "test")
    sent = sweeper.sweep()
    head = coord.sequence.head("default", "demo")
    assert [j.session_id for j in sent] == [head]
    sweeper.stop()
    coord.close()
