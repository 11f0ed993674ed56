"""The worker system against a real Redis and real `celery worker` processes (not eager)."""

from __future__ import annotations

import random
import subprocess
import sys
import time
from pathlib import Path

import pytest
from celery import Celery

from common.celery_config import celery_config
from common.inputs.formats import read_sessions
from common.models.session import SessionInput
from common.producer import MemoryClient
from common.settings import BrokerSettings, Settings, StoreSettings
from common.store import records
from common.store.backends import open_store
from common.store.coordination import Coordination
from tests.integration.conftest import ROOT, WorkerProcess, worker_env
from tests.integration.memory_dump import dump

pytestmark = pytest.mark.integration

ALL_QUEUES = "ingest,extract,memory,profile,query"


def embedded_reference(data: Path, files: list[Path]) -> None:
    """Sequential ingest on embedded defaults, through the CLI as a user runs it."""
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "cli",
            "--quiet",
            "--data-dir",
            str(data),
            "ingest",
            "--create-space",
            *map(str, files),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert out.returncode == 0, out.stderr


def create_spaces(data: Path, spaces: list[str]) -> None:
    store = open_store(StoreSettings(qdrant_path=data / "qdrant"), 384)
    for space in spaces:
        records.create_space(store, "default", space)
    store.close()


def producer(redis_url: str) -> MemoryClient:
    """A producer that knows task names only: a bare Celery app, no worker code."""
    settings = Settings(broker=BrokerSettings(url=redis_url))
    app = Celery("producer")
    app.conf.update(celery_config(settings))
    coord = Coordination.redis(redis_url, 3600)
    return MemoryClient(app, coord.jobs, coord.sequence)


def shuffled_backlog(files: list[Path], seed: int) -> list[tuple[str, SessionInput]]:
    items: list[tuple[str, SessionInput]] = []
    for f in files:
        data = read_sessions(f)
        space = data.space
        assert space, f"{f} names no space"
        items.extend((space, s) for s in data.sessions)
    random.Random(seed).shuffle(items)
    return items


def test_shuffled_backlog_through_queues_equals_sequential_ingest(
    tmp_path: Path, redis_url: str, locomo: Path
) -> None:
    files = sorted((locomo / "atommem_facts").glob("conv-*.json"))
    assert len(files) == 7
    spaces = [f.stem for f in files]
    embedded_reference(tmp_path / "embedded", files)

    queued = tmp_path / "queued"
    create_spaces(queued, spaces)
    worker = WorkerProcess(worker_env(redis_url, queued), tmp_path / "worker.log", ALL_QUEUES)
    try:
        worker.wait_ready()
        client = producer(redis_url)
        items = shuffled_backlog(files, seed=7)
        jobs = client.submit_many("default", items)
        finished = client.wait("default", [j.job_id for j in jobs], timeout=900)
    finally:
        worker.stop()
    assert [j.state for j in finished] == ["done"] * len(items)
    expected = dump(tmp_path / "embedded" / "qdrant", "default", spaces)
    got = dump(queued / "qdrant", "default", spaces)
    for space in spaces:
        for kind in ("facts", "events", "profiles"):
            assert got[space][kind] == expected[space][kind], f"{space} {kind} differ"


def test_worker_killed_mid_ingest_loses_and_duplicates_nothing(
    tmp_path: Path, redis_url: str, locomo: Path
) -> None:
    files = [locomo / "atommem_facts" / "conv-30.json"]
    embedded_reference(tmp_path / "embedded", files)

    queued = tmp_path / "queued"
    create_spaces(queued, ["conv-30"])
    env = worker_env(redis_url, queued)
    first = WorkerProcess(env, tmp_path / "worker1.log", ALL_QUEUES)
    first.wait_ready()
    client = producer(redis_url)
    jobs = client.submit_many("default", shuffled_backlog(files, seed=3))
    ids = [j.job_id for j in jobs]
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        done = sum(client.job("default", j).state == "done" for j in ids)
        if done >= 4:
            break
        time.sleep(0.05)
    first.kill()
    done_at_kill = sum(client.job("default", j).state == "done" for j in ids)
    assert 4 <= done_at_kill < len(ids), "the kill must land in the middle of the ingest"

    second = WorkerProcess(env, tmp_path / "worker2.log", ALL_QUEUES)
    try:
        second.wait_ready()
        finished = client.wait("default", ids, timeout=600)
    finally:
        second.stop()
    assert [j.state for j in finished] == ["done"] * len(ids)
    expected = dump(tmp_path / "embedded" / "qdrant", "default", ["conv-30"])
    got = dump(queued / "qdrant", "default", ["conv-30"])
    assert got == expected


def test_failed_jobs_say_why_and_retry_without_duplicates(tmp_path: Path, redis_url: str) -> None:
    sample = ROOT / "cli" / "samples" / "sample_conversation.json"
    embedded_reference(tmp_path / "embedded", [sample])

    queued = tmp_path / "queued"
    env = worker_env(redis_url, queued)
    client = producer(redis_url)
    sessions = read_sessions(sample).sessions
    worker = WorkerProcess(env, tmp_path / "worker1.log", ALL_QUEUES)
    try:
        worker.wait_ready()
        jobs = client.submit("default", "demo", sessions)  # the space does not exist yet
        failed = client.wait("default", [j.job_id for j in jobs], timeout=300)
    finally:
        worker.stop()
    assert {j.state for j in failed} == {"failed"}
    assert all("space 'demo' does not exist" in (j.reason or "") for j in failed)

    create_spaces(queued, ["demo"])
    worker = WorkerProcess(env, tmp_path / "worker2.log", ALL_QUEUES)
    try:
        worker.wait_ready()
        for job in failed:
            client.retry("default", job.job_id)
        done = client.wait("default", [j.job_id for j in failed], timeout=300)
        assert [j.state for j in done] == ["done"] * len(sessions)
        assert all(j.attempts == 2 for j in done)
        again = client.retry("default", failed[0].job_id)  # a finished job: nothing changes
        assert again == client.job("default", failed[0].job_id) == done[0]
    finally:
        worker.stop()
    expected = dump(tmp_path / "embedded" / "qdrant", "default", ["demo"])
    assert dump(queued / "qdrant", "default", ["demo"]) == expected
