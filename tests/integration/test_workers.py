"""The worker system against a real Redis and real `celery worker` processes (not eager)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from common.inputs.formats import read_sessions
from tests.helpers.memory_dump import dump
from tests.helpers.samples import SAMPLE
from tests.helpers.workers import (
    ALL_QUEUES,
    create_spaces,
    embedded_reference,
    producer,
    shuffled_backlog,
    worker_env,
)
from workers.launch import WorkerProcess

pytestmark = pytest.mark.integration


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
    embedded_reference(tmp_path / "embedded", [SAMPLE])

    queued = tmp_path / "queued"
    env = worker_env(redis_url, queued)
    client = producer(redis_url)
    sessions = read_sessions(SAMPLE).sessions
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
