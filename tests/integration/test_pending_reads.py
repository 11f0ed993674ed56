"""Reads that see a session still being ingested, with real `celery worker` processes on a real
Redis: while no ingest worker runs, search finds the submitted session's turn as pending; once
the workers commit it, the same search finds the fact instead. Erasing a session in flight
takes its turns out of reads at once, and nothing of it is committed when workers start."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import redis

from common.memory.stages import ERASED
from common.models.session import SessionInput, Turn
from common.producer import Producer
from common.settings import StoreSettings
from common.store import records
from common.store.backends import open_store
from tests.helpers.redis import flushed, redis_text, shared_url
from tests.helpers.workers import ALL_QUEUES, producer, worker_env
from workers.launch import WorkerProcess

pytestmark = pytest.mark.integration

REDIS_URL = shared_url(__name__)
QUESTION = "Where does Ann live now?"
SECRET = "Vindelhavn"


@pytest.fixture
def redis_db() -> Iterator[redis.Redis]:
    with flushed(REDIS_URL, decode_responses=True) as client:
        yield client


def _session(session_id: str, town: str) -> SessionInput:
    return SessionInput(
        session_id=session_id,
        started_at=datetime(2024, 6, 1, 10, 0),
        participants=["Ann", "Bob"],
        turns=[
            Turn(speaker="Bob", text="How was your week?"),
            Turn(speaker="Ann", text=f"I moved to {town} last month and I love it there."),
            Turn(speaker="Bob", text="That is wonderful news."),
        ],
    )


def _space(data: Path) -> None:
    store = open_store(StoreSettings(qdrant_path=data / "qdrant"), 384)
    records.create_space(store, "default", "alice")
    store.close()


def _eventually(check: Callable[[], bool], timeout: float = 120.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.2)
    return False


def _search(client: Producer) -> dict[str, Any]:
    return client.search("default", "alice", QUESTION, timeout=120).model_dump(mode="json")


def test_a_session_in_the_queues_is_found_as_pending_until_its_facts_take_over(
    tmp_path: Path, redis_db: redis.Redis
) -> None:
    data = tmp_path / "data"
    _space(data)
    env = worker_env(REDIS_URL, data)
    client = producer(REDIS_URL)
    # Only a query worker: the session waits in the ingest queue.
    reader = WorkerProcess(env, tmp_path / "query.log", "query", concurrency=1)
    try:
        reader.wait_ready()
        (job,) = client.submit("default", "alice", [_session("s1", "Denver")])
        before = _search(client)
        asked = client.ask("default", "alice", QUESTION, timeout=120)
        assert client.job("default", job.job_id).state == "queued"
    finally:
        reader.stop()
    assert before["hits"] == [] and before["pending_cut"] == 0
    top = before["pending"][0]
    assert top["status"] == "pending" and top["session_id"] == "s1"
    assert top["turn_id"] == "s1:1" and top["position"] == 1 and top["speaker"] == "Ann"
    assert "Denver" in top["text"] and top["score"] >= 0.4
    assert top["time"] == "2024-06-01T10:00:00"
    assert "Denver" in asked.answer and asked.answer_fact_ids[0] == "pending:s1:s1:1"

    # The ingest workers start (one process: the embedded store has one owner).
    worker = WorkerProcess(env, tmp_path / "worker.log", ALL_QUEUES)
    try:
        worker.wait_ready()
        assert client.wait("default", [job.job_id], timeout=300)[0].state == "done"
        after = _search(client)
    finally:
        worker.stop()
    assert after["pending"] == [] and after["pending_cut"] == 0
    assert "Denver" in after["hits"][0]["text"]
    assert after["hits"][0]["session_id"] == "s1" and "s1:1" in after["hits"][0]["turn_ids"]


def _accept_ran(log: Path) -> bool:
    return re.search(r"atommem\.ingest\.accept\[[^\]]+\] succeeded", log.read_text()) is not None


def _values(client: redis.Redis) -> str:
    return redis_text(client)


def test_erasing_a_session_in_flight_takes_it_out_of_reads_and_out_of_memory(
    tmp_path: Path, redis_db: redis.Redis
) -> None:
    data = tmp_path / "data"
    _space(data)
    env = worker_env(REDIS_URL, data)
    client = producer(REDIS_URL)
    # Queries and the admin queue run; nothing accepts or extracts.
    reader = WorkerProcess(env, tmp_path / "reader.log", "memory,query", concurrency=1)
    try:
        reader.wait_ready()
        (job,) = client.submit("default", "alice", [_session("s1", SECRET)])
        assert SECRET in _search(client)["pending"][0]["text"]
        receipt = client.erase("default", "alice", "erase_session", "s1")
        assert receipt.erased.sessions_deleted == ["s1"]
        assert _search(client)["pending"] == []  # at once
        failed = client.job("default", job.job_id)
        assert failed.state == "failed" and failed.reason == ERASED
    finally:
        reader.stop()

    log = tmp_path / "worker.log"
    worker = WorkerProcess(env, log, ALL_QUEUES)
    try:
        worker.wait_ready()
        # The accept still queued runs now (through its tenant's lane) and finds its job
        # erased: once it ran, no key holds the session's turns any more.
        assert _eventually(lambda: _accept_ran(log)), log.read_text()[-3000:]
        assert _eventually(lambda: SECRET not in _values(redis_db)), _values(redis_db)[-3000:]
        assert client.job("default", job.job_id).state == "failed"
        assert client.sessions("default", "alice").total == 0
        assert client.page("default", "alice", "facts").total == 0
        assert SECRET not in json.dumps(_search(client))

        # Submitted again later, the session is a new job and goes through.
        (again,) = client.submit("default", "alice", [_session("s1", "Denver")])
        assert again.job_id == job.job_id and again.state == "queued"
        assert client.wait("default", [again.job_id], timeout=300)[0].state == "done"
        after = _search(client)
    finally:
        worker.stop()
    assert "Denver" in after["hits"][0]["text"] and SECRET not in json.dumps(after)
    assert after["pending"] == []
