"""Fixtures for tests against a real Redis and real Celery worker processes."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from workers.launch import ROOT, WorkerProcess

__all__ = ["ROOT", "WorkerProcess"]

REDIS_URL = "redis://127.0.0.1:6379/11"
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


def worker_env(redis_url: str, data: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(WORKER_LIMITS)
    env["ATOMMEM_BROKER__URL"] = redis_url
    env["ATOMMEM_STORE__QDRANT_PATH"] = str(data / "qdrant")
    return env
