"""A real `celery worker` keeps the probe file its container probes read fresh on Celery's
own worker heartbeat (workers/probe.py), and the probe command passes on it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.helpers.redis_server import RedisServer, start_redis
from tests.helpers.workers import worker_env
from workers.launch import ROOT

pytestmark = pytest.mark.integration


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[RedisServer]:
    server = start_redis(tmp_path / "redis")
    yield server
    server.stop()


def wait_for(
    condition: str, check: Callable[[], bool], proc: subprocess.Popen[bytes], log: Path
) -> None:
    deadline = time.monotonic() + 120
    while not check():
        if proc.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"{condition}:\n{log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.2)


def test_a_running_worker_keeps_its_probe_file_fresh(
    private_redis: RedisServer, tmp_path: Path
) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = worker_env(private_redis.url(), tmp_path) | {"TMPDIR": str(tmp)}
    log = tmp_path / "worker.log"
    argv = [sys.executable, "-m", "celery", "-A", "workers.celery_app", "worker", "-P", "threads",
            "-c", "1", "-Q", "query", "-n", "probe@%h", "-l", "info", "--without-mingle",
            "--without-gossip"]  # fmt: skip
    with log.open("ab") as out:
        proc = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    path = tmp / "atommem-worker.alive"
    try:
        wait_for("no probe file", path.exists, proc, log)
        first = path.stat().st_mtime_ns
        wait_for("the probe file went stale", lambda: path.stat().st_mtime_ns > first, proc, log)
        probe = [sys.executable, "-m", "workers.probe", "--max-age", "30"]
        assert subprocess.run(probe, cwd=ROOT, env=env, timeout=60).returncode == 0
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
