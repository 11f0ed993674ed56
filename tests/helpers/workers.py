"""Real `celery worker` processes for the integration tests: their environment, a producer that
knows task names only, and the embedded ingest their results are compared with."""

from __future__ import annotations

import os
import random
import subprocess
from pathlib import Path

from celery import Celery

from common.celery_config import celery_config
from common.inputs.formats import read_sessions
from common.models.session import SessionInput
from common.producer import Producer
from common.settings import BrokerSettings, Settings, StoreSettings
from common.store import records
from common.store.backends import open_store
from common.store.coordination.roles import Coordination
from tests.helpers.cli import argv
from workers.launch import ROOT

ALL_QUEUES = "ingest,extract,memory,profile,query"

# Short limits so a killed worker's task comes back within the test's patience.
WORKER_LIMITS = {
    "ATOMMEM_BROKER__VISIBILITY_TIMEOUT": "30",
    "ATOMMEM_BROKER__SOFT_TIME_LIMIT": "15",
    "ATOMMEM_BROKER__TIME_LIMIT": "20",
    "ATOMMEM_BROKER__LOCK_TTL_MS": "25000",
    "ATOMMEM_BROKER__UNACKED_RESTORE_INTERVAL": "1",
}


def worker_env(redis_url: str, data: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(WORKER_LIMITS)
    env["ATOMMEM_BROKER__URL"] = redis_url
    env["ATOMMEM_STORE__QDRANT_PATH"] = str(data / "qdrant")
    return env


def producer(redis_url: str, job_ttl_s: int = 3600) -> Producer:
    """A producer that knows task names only, as the API builds it: a bare Celery app, no
    worker code."""
    settings = Settings(broker=BrokerSettings(url=redis_url))
    app = Celery("producer")
    app.conf.update(celery_config(settings))
    coord = Coordination.redis(redis_url, job_ttl_s)
    return Producer(app, coord.jobs, coord.sequence)


def create_spaces(data: Path, spaces: list[str]) -> None:
    store = open_store(StoreSettings(qdrant_path=data / "qdrant"), 384)
    for space in spaces:
        records.create_space(store, "default", space)
    store.close()


def embedded_reference(data: Path, files: list[Path]) -> None:
    """Sequential ingest on embedded defaults, through the CLI as a user runs it."""
    out = subprocess.run(
        argv(data, "ingest", "--create-space", *map(str, files)),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert out.returncode == 0, out.stderr


def shuffled_backlog(files: list[Path], seed: int) -> list[tuple[str, SessionInput]]:
    items: list[tuple[str, SessionInput]] = []
    for f in files:
        data = read_sessions(f)
        space = data.space
        assert space, f"{f} names no space"
        items.extend((space, s) for s in data.sessions)
    random.Random(seed).shuffle(items)
    return items
