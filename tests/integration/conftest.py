"""Fixtures for tests against a real Redis and real Celery worker processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

REDIS_URL = "redis://127.0.0.1:6379/11"
ROOT = Path(__file__).resolve().parents[2]
LOCOMO = ROOT.parent / "shared" / "data" / "locomo"

# Short limits so a killed worker's task comes back within the test's patience.
WORKER_LIMITS = {
    "ATOMMEM_BROKER__VISIBILITY_TIMEOUT": "30",
    "ATOMMEM_BROKER__SOFT_TIME_LIMIT": "15",
    "ATOMMEM_BROKER__TIME_LIMIT": "20",
    "ATOMMEM_BROKER__LOCK_TTL_MS": "25000",
    "ATOMMEM_BROKER__UNACKED_RESTORE_INTERVAL": "1",
}


def _unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (required in CI)")
    pytest.skip(reason)


@pytest.fixture
def redis_url() -> Iterator[str]:
    client = redis.Redis.from_url(REDIS_URL)
    try:
        client.ping()
    except redis.ConnectionError:
        _unavailable("Redis is not running on 127.0.0.1:6379")
    client.flushdb()
    yield REDIS_URL
    client.flushdb()
    client.close()


@pytest.fixture
def locomo() -> Path:
    if not (LOCOMO / "atommem_facts").is_dir():
        _unavailable(f"the shared LoCoMo data is not at {LOCOMO}")
    return LOCOMO


class WorkerProcess:
    """`celery worker` for this project's app, in its own process group."""

    def __init__(self, env: dict[str, str], log: Path, queues: str, concurrency: int = 2) -> None:
        self.log = log
        self._handle = log.open("ab")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "workers.celery_app",
                "worker",
                "-P",
                "threads",
                "-c",
                str(concurrency),
                "-Q",
                queues,
                "-l",
                "info",
                "--without-heartbeat",
                "--without-mingle",
                "--without-gossip",
            ],
            cwd=ROOT,
            env=env,
            stdout=self._handle,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"worker exited early:\n{self.log.read_text()[-3000:]}")
            if " ready." in self.log.read_text(errors="replace"):
                return
            time.sleep(0.2)
        raise TimeoutError(f"worker not ready:\n{self.log.read_text()[-3000:]}")

    def kill(self) -> None:
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)
        self._handle.close()

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        self._handle.close()


def worker_env(redis_url: str, data: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(WORKER_LIMITS)
    env["ATOMMEM_BROKER__URL"] = redis_url
    env["ATOMMEM_STORE__QDRANT_PATH"] = str(data / "qdrant")
    return env
