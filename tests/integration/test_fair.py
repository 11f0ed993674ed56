"""Fair lanes on a private Redis: tenants take turns whatever came first and the one with the
fewest steps running goes first, a step offered twice waits once, a redelivered task takes its
step again, a vanished task's step comes back; and through real worker processes, one tenant's
session is not held behind another's backlog, and a killed worker's steps come back."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from celery import Celery

from common.celery_config import celery_config
from common.inputs.formats import read_sessions
from common.models.jobs import Job
from common.models.session import SessionInput
from common.producer import Producer
from common.settings import BrokerSettings, Settings, StoreSettings
from common.store import keys, records
from common.store.backends import open_store
from common.store.coordination.fair import RedisFair
from common.store.coordination.roles import Coordination
from tests.helpers.memory_dump import dump
from tests.helpers.redis_server import RedisServer, start_redis
from tests.helpers.workers import (
    ALL_QUEUES,
    create_spaces,
    embedded_reference,
    shuffled_backlog,
    worker_env,
)
from workers.launch import WorkerProcess

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    srv = start_redis(tmp_path_factory.mktemp("redis"), appendonly=False)
    yield srv
    srv.stop()


@pytest.fixture
def lanes(server: RedisServer) -> Iterator[RedisFair]:
    client = server.client()
    client.flushdb()
    yield RedisFair(client)
    client.close()


def take(
    lanes: RedisFair, task_id: str, now: float = 100.0, stale_before: float = 0.0
) -> str | None:
    """Claim for `task_id` and let go at once; the entry it got, or None."""
    turn = lanes.claim("x", task_id, now, stale_before)
    lanes.release("x", task_id)
    return None if turn.claim is None else turn.claim.entry


def test_tenants_take_turns_whatever_came_first(lanes: RedisFair) -> None:
    assert lanes.offer("x", "flood", [(f"f{i}", f"F{i}") for i in range(5)]) == 5
    lanes.offer("x", "small", [("s0", "S0")])
    lanes.offer("x", "other", [("o0", "O0"), ("o1", "O1")])
    order = [take(lanes, f"t{i}") for i in range(9)]
    assert order == ["F0", "S0", "O0", "F1", "O1", "F2", "F3", "F4", None]
    assert lanes.waiting("x", "flood") == 0


def test_the_tenant_with_fewer_steps_running_goes_first(lanes: RedisFair) -> None:
    lanes.offer("x", "flood", [(f"f{i}", f"F{i}") for i in range(6)])
    lanes.offer("y", "flood", [("g0", "G0")])
    held = [lanes.claim("x", f"flood-{i}", 100.0, 0.0).claim for i in range(2)]
    assert [c.entry for c in held if c] == ["F0", "F1"]  # nobody else waits: both slots
    lanes.offer("x", "small", [("s0", "S0"), ("s1", "S1")])
    lanes.offer("y", "small", [("t0", "T0")])
    assert lanes.running("flood") == 2
    # The flood is ahead in the ring but has two running, in any lane: the small tenant goes
    # until it has as many.
    assert take(lanes, "a") == "S0"
    got = lanes.claim("y", "b", 100.0, 0.0).claim
    assert got is not None and got.entry == "T0"
    assert lanes.running("small") == 1
    assert take(lanes, "c") == "S1"
    lanes.release("y", "b")
    for i in range(2):
        lanes.release("x", f"flood-{i}")
    assert lanes.running("flood") == lanes.running("small") == 0


def test_a_step_offered_again_while_it_waits_is_queued_once(lanes: RedisFair) -> None:
    assert lanes.offer("x", "a", [("drain:s", "1")]) == 1
    assert lanes.offer("x", "a", [("drain:s", "2")]) == 0
    assert lanes.waiting("x", "a") == 1
    assert take(lanes, "t1") == "1"
    assert lanes.offer("x", "a", [("drain:s", "3")]) == 1  # taken: a new request waits again
    assert take(lanes, "t2") == "3"


def test_a_redelivered_task_takes_the_same_step_again(lanes: RedisFair) -> None:
    lanes.offer("x", "a", [("k0", "A0"), ("k1", "A1")])
    first = lanes.claim("x", "t1", 100.0, 0.0).claim
    again = lanes.claim("x", "t1", 101.0, 0.0).claim  # the worker died; the task came back
    assert first is not None and again == first and first.entry == "A0"
    assert take(lanes, "t2") == "A1"
    lanes.release("x", "t1")
    assert take(lanes, "t1") is None


def test_the_step_of_a_task_gone_for_good_goes_back_to_the_front(lanes: RedisFair) -> None:
    lanes.offer("x", "a", [("k0", "A0"), ("k1", "A1")])
    lanes.claim("x", "dead", 100.0, 0.0)  # takes A0 and never finishes
    lanes.claim("x", "alive", 300.0, 0.0)  # takes A1, recently
    lanes.offer("x", "a", [("k2", "A2")])
    assert lanes.running("a") == 2
    turn = lanes.claim("x", "t3", 400.0, stale_before=200.0)
    assert turn.requeued == 1  # one new task must be sent for it
    assert lanes.running("a") == 2  # "dead" no longer counts; "t3" does
    assert turn.claim is not None and turn.claim.entry == "A0"
    lanes.release("x", "t3")
    assert take(lanes, "t4", 400.0, 200.0) == "A2"  # "alive" kept A1
    assert take(lanes, "t5", 400.0, 200.0) is None


def test_a_vanished_step_already_offered_again_is_not_queued_twice(lanes: RedisFair) -> None:
    lanes.offer("x", "a", [("drain:s", "1")])
    lanes.claim("x", "dead", 100.0, 0.0)
    lanes.offer("x", "a", [("drain:s", "2")])
    turn = lanes.claim("x", "t2", 400.0, stale_before=200.0)
    assert turn.requeued == 0
    assert turn.claim is not None and turn.claim.entry == "2"


def _producer(url: str) -> tuple[Producer, Coordination]:
    app = Celery("producer")
    app.conf.update(celery_config(Settings(broker=BrokerSettings(url=url))))
    coord = Coordination.redis(url, 3600)
    return Producer(app, coord.jobs, coord.sequence), coord


DURING_LOAD = 3  # sessions done while the questions go on


def _done_before(jobs: list[Job], moment: float) -> int:
    return sum(1 for j in jobs if j.updated_at < moment)


def test_a_small_tenant_is_not_held_behind_another_tenants_backlog(
    tmp_path: Path, server: RedisServer, locomo: Path
) -> None:
    """A flood of 16 sessions in two spaces, then, once the flood is under way, one session
    of another tenant: it is done while most of the flood still waits (first in, first out
    it waited for all of it)."""
    facts = locomo / "atommem_facts"
    flood: list[tuple[str, SessionInput]] = [
        (name, s)
        for name in ("conv-26", "conv-30")
        for s in read_sessions(facts / f"{name}.json").sessions[:8]
    ]
    small = next(s for s in read_sessions(facts / "conv-47.json").sessions if len(s.turns) == 10)
    store = open_store(StoreSettings(qdrant_path=tmp_path / "qdrant"), 384)
    for space in ("conv-26", "conv-30"):
        records.create_space(store, "flood", space)
    records.create_space(store, "small", "mine")
    store.close()
    url = server.url(1)
    server.client(1).flushdb()
    worker = WorkerProcess(worker_env(url, tmp_path), tmp_path / "worker.log", ALL_QUEUES, 1)
    client, coord = _producer(url)
    try:
        worker.wait_ready()
        flood_jobs = client.submit_many("flood", flood)
        ids = [j.job_id for j in flood_jobs]
        deadline = time.monotonic() + 300
        while not any(client.job("flood", j).state == "done" for j in ids):
            assert time.monotonic() < deadline, "the flood did not start"
            time.sleep(0.02)
        submitted = time.time()
        (mine,) = client.submit("small", "mine", [small])
        (done,) = client.wait("small", [mine.job_id], timeout=600)
        flood_done = client.wait("flood", ids, timeout=900)
    finally:
        worker.stop()
        coord.close()
    assert done.state == "done"
    assert [j.state for j in flood_done] == ["done"] * len(flood)
    waiting = len(flood) - _done_before(flood_done, submitted)
    overtaken = _done_before(flood_done, done.updated_at) - _done_before(flood_done, submitted)
    assert waiting >= 12, "the small session must arrive while most of the flood waits"
    # Taking turns, the flood finishes a session per turn it gets in the memory lane while
    # the small one goes through its steps (5 of 15 here); first in, first out, all 15.
    assert overtaken <= waiting // 2, f"{overtaken} of {waiting} waiting flood sessions went first"


LANES_HELD = ("extract", "memory")


def test_steps_taken_by_a_killed_worker_come_back(
    tmp_path: Path, server: RedisServer, locomo: Path
) -> None:
    """SIGKILL the worker mid-ingest with fair lanes: the steps its lane tasks held come back
    with those tasks (redelivered under the same id), and memory equals a sequential ingest."""
    files = [locomo / "atommem_facts" / "conv-30.json"]
    embedded_reference(tmp_path / "embedded", files)
    queued = tmp_path / "queued"
    create_spaces(queued, ["conv-30"])
    url = server.url(2)
    server.client(2).flushdb()
    env = worker_env(url, queued)
    client, coord = _producer(url)
    first = WorkerProcess(env, tmp_path / "worker1.log", ALL_QUEUES)
    try:
        first.wait_ready()
        ids = [j.job_id for j in client.submit_many("default", shuffled_backlog(files, seed=3))]
        deadline = time.monotonic() + 300

        def claims() -> int:
            return sum(server.client(2).hlen(keys.fair_claims(lane)) for lane in LANES_HELD)

        # killed once the ingest is under way and a lane task holds a step (the instant
        # between two steps, with no claim held, would test nothing)
        while sum(client.job("default", j).state == "done" for j in ids) < 4 or not claims():
            assert time.monotonic() < deadline, "the ingest did not get going"
            time.sleep(0.01)
        first.kill()
        held = claims()
        done_at_kill = sum(client.job("default", j).state == "done" for j in ids)
        assert done_at_kill < len(ids), "the kill must land in the middle of the ingest"
        second = WorkerProcess(env, tmp_path / "worker2.log", ALL_QUEUES)
        try:
            second.wait_ready()
            finished = client.wait("default", ids, timeout=600)
        finally:
            second.stop()
    finally:
        first.stop()
        coord.close()
    assert held >= 1, "the kill must catch a lane task holding its step"
    assert [j.state for j in finished] == ["done"] * len(ids)
    expected = dump(tmp_path / "embedded" / "qdrant", "default", ["conv-30"])
    assert dump(queued / "qdrant", "default", ["conv-30"]) == expected


def test_sessions_are_ingested_while_questions_keep_a_worker_busy(
    tmp_path: Path, server: RedisServer, locomo: Path
) -> None:
    """Four clients ask question after question of one worker slot while two tenants' sessions
    wait: the sessions are done during the load, not only after it (a worker took every waiting
    question ahead of the lanes' tasks, so ingestion waited for the questions to stop)."""
    sessions = [s for s in read_sessions(locomo / "atommem_facts" / "conv-47.json").sessions[:6]]
    tenants = ("t1", "t2")
    store = open_store(StoreSettings(qdrant_path=tmp_path / "qdrant"), 384)
    for tenant in tenants:
        records.create_space(store, tenant, "talk")
    store.close()
    url = server.url(3)
    server.client(3).flushdb()
    worker = WorkerProcess(worker_env(url, tmp_path), tmp_path / "worker.log", ALL_QUEUES, 1)
    client, coord = _producer(url)
    stop, asked = threading.Event(), [0]

    def ask_again_and_again(tenant: str) -> None:
        while not stop.is_set():
            client.search(tenant, "talk", "what did they talk about?", timeout=60)
            asked[0] += 1

    askers = [
        threading.Thread(target=ask_again_and_again, args=(tenants[i % 2],)) for i in range(4)
    ]
    try:
        worker.wait_ready()
        client.search("t1", "talk", "warm up", timeout=120)  # the embedding model loads
        for thread in askers:
            thread.start()
        while asked[0] < 20:  # the questions keep the slot busy before any session comes
            time.sleep(0.05)
        at_submit = asked[0]
        jobs = {t: [j.job_id for j in client.submit(t, "talk", sessions[:3])] for t in tenants}
        deadline = time.monotonic() + 120
        done = 0
        while done < DURING_LOAD and time.monotonic() < deadline:
            time.sleep(0.2)
            done = sum(client.job(t, j).state == "done" for t, ids in jobs.items() for j in ids)
        under_load = asked[0]
    finally:
        stop.set()
        for thread in askers:
            thread.join(90)
        worker.stop()
        coord.close()
    assert under_load - at_submit >= 4, "the questions went on while the sessions were ingested"
    assert done >= DURING_LOAD, f"{done} of 6 sessions done in 120 s of questions"
