"""Questions first, through a real worker process on a private Redis: with its one pool slot
held by an extract whose model call the test keeps waiting, a search is answered on the
worker's query slots (workers.query_slots), the pool's thread at a lower priority; with the
slots off, it waits for the extract."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from celery.exceptions import TimeoutError as ResultTimeout

from common.inputs.formats import read_sessions
from tests.helpers.fake_llm_server import FakeLLM, Reply, schema_answer, serve
from tests.helpers.redis_server import RedisServer, start_redis
from tests.helpers.workers import ALL_QUEUES, create_spaces, producer, worker_env
from workers.launch import ROOT, WorkerProcess
from workers.query_slots import POOL_NICE

pytestmark = pytest.mark.integration

SPACE = "talk"
SAMPLE = ROOT / "cli" / "samples" / "sample_conversation.json"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    srv = start_redis(tmp_path / "redis", appendonly=False)
    yield srv
    srv.stop()


class Held:
    """A model call that does not return until released: the extract holding the slot."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self, request: dict[str, Any]) -> Reply:
        self.entered.set()
        self.release.wait(120)
        return schema_answer(request)


def _worker(tmp_path: Path, url: str, fake: FakeLLM, query_concurrency: int) -> WorkerProcess:
    create_spaces(tmp_path, [SPACE])
    env = worker_env(url, tmp_path) | {
        "ATOMMEM_LLM__BACKEND": "openai",
        "ATOMMEM_LLM__GENERAL__BASE_URL": fake.base_url,
        "ATOMMEM_LLM__GENERAL__MODEL": "fake",
        "ATOMMEM_LLM__STRUCTURED_OUTPUT": "json_schema",
        "ATOMMEM_BROKER__QUERY_CONCURRENCY": str(query_concurrency),
        # the held call outlasts the test's patience, not the task's limits
        "ATOMMEM_BROKER__SOFT_TIME_LIMIT": "150",
        "ATOMMEM_BROKER__TIME_LIMIT": "160",
        "ATOMMEM_BROKER__VISIBILITY_TIMEOUT": "300",
    }
    worker = WorkerProcess(env, tmp_path / "worker.log", ALL_QUEUES, concurrency=1)
    worker.wait_ready()
    return worker


def _nice_values(pid: int) -> set[int]:
    """The nice value of each of the process's threads (Linux)."""
    values = set()
    for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
        values.add(int(stat.read_text().rsplit(")", 1)[1].split()[16]))
    return values


def _search_while_held(
    tmp_path: Path, url: str, query_concurrency: int, timeout: float
) -> tuple[str, set[int]]:
    """Hold the pool's slot with an extract, search; how the search went, and the nice
    values of the worker's threads meanwhile."""
    held = Held()
    with serve(schema_answer) as fake:
        fake.then(held)  # the first model call is the session's extract
        worker = _worker(tmp_path, url, fake, query_concurrency)
        client = producer(url)
        try:
            (job,) = client.submit("default", SPACE, read_sessions(SAMPLE).sessions[:1])
            assert held.entered.wait(120), "the extract did not call the model"
            nice = _nice_values(worker.proc.pid)
            try:
                client.search("default", SPACE, "where did they go?", timeout=timeout)
                outcome = "held" if not held.release.is_set() else "released"
            except ResultTimeout:
                outcome = "timed out"
            held.release.set()
            (done,) = client.wait("default", [job.job_id], timeout=120)
            assert done.state == "done", done.reason
        finally:
            held.release.set()
            worker.stop()
    return outcome, nice


def test_a_search_is_answered_while_a_commit_holds_every_pool_slot(
    tmp_path: Path, server: RedisServer
) -> None:
    outcome, nice = _search_while_held(tmp_path, server.url(), 2, timeout=120)
    assert outcome == "held"
    assert POOL_NICE in nice and 0 in nice, "the pool's thread yields the cores to questions"
    log = (tmp_path / "worker.log").read_text(errors="replace")
    assert "questions on their own consumer, 2 threads" in log


def test_without_query_slots_the_search_waits_for_the_pool(
    tmp_path: Path, server: RedisServer
) -> None:
    """The same worker with the slots off: the search is not answered while the extract
    holds the one slot (the case the slots are for)."""
    outcome, nice = _search_while_held(tmp_path, server.url(), 0, timeout=5)
    assert outcome == "timed out"
    assert nice == {0}


def test_as_many_clients_as_slots_are_answered_without_waiting_out_the_loop(
    tmp_path: Path, server: RedisServer
) -> None:
    """Two clients asking at once fill both slots. Celery's blocking loop then slept out its
    2 s drain timeout before it took the next question, so every answer came 2 s late (4 s
    with four clients); each question here has 0.8 s, against some 20 ms alone."""
    create_spaces(tmp_path, [SPACE])
    env = worker_env(server.url(), tmp_path) | {"ATOMMEM_BROKER__QUERY_CONCURRENCY": "2"}
    worker = WorkerProcess(env, tmp_path / "worker.log", ALL_QUEUES, concurrency=1)
    worker.wait_ready()
    client = producer(server.url())
    late: list[str] = []

    def ask(who: int) -> None:
        for i in range(5):
            try:
                client.search(
                    "default", SPACE, f"where did client {who} go on day {i}?", timeout=1.5
                )
            except ResultTimeout:
                late.append(f"client {who}, question {i}")

    try:
        client.search("default", SPACE, "warm up?", timeout=60)
        clients = [threading.Thread(target=ask, args=(who,)) for who in (0, 1)]
        for c in clients:
            c.start()
        for c in clients:
            c.join(60)
    finally:
        worker.stop()
    assert not late
