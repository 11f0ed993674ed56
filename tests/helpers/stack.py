"""A running stack for end-to-end tests: a real Redis, a real `celery worker` process that
owns the store, and the API under uvicorn on a loopback port; tests talk HTTP only."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import redis

from tests.helpers.ports import free_port
from workers.launch import ROOT, WorkerProcess

ADMIN_KEY = "e2e-admin-key-0123456789"
WRITES_PER_MINUTE = 60


@dataclass
class Stack:
    url: str
    env: dict[str, str]
    data: Path
    redis: redis.Redis
    worker: WorkerProcess

    def admin(self) -> httpx.Client:
        return httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {ADMIN_KEY}"}, timeout=120
        )

    def key(self, name: str) -> str:
        """A new key of a new tenant."""
        with self.admin() as admin:
            assert admin.post("/v1/admin/tenants", json={"name": name}).status_code == 201
            return str(admin.post(f"/v1/admin/tenants/{name}/keys").json()["api_key"])

    def tenant(self, name: str) -> httpx.Client:
        """A client holding a new key of a new tenant."""
        return httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {self.key(name)}"}, timeout=120
        )


def api_ready(url: str, api: subprocess.Popen[bytes], log: Path, timeout: float = 60) -> None:
    """Until the API process at `url` answers /readyz with 200; its log's tail if it exits or
    the time runs out first."""
    until_ready(f"{url}/readyz", api, log, "api", timeout)


def until_ready(
    url: str, proc: subprocess.Popen[bytes], log: Path, what: str, timeout: float = 60
) -> None:
    """Until `url` answers 200; the process's log tail if it exits or the time runs out."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx.get(url, timeout=10).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{what} not ready:\n{log.read_text()[-3000:]}")
        time.sleep(0.2)


@contextmanager
def running_stack(redis_url: str, data: Path) -> Iterator[Stack]:
    """A worker and the API on `redis_url` (flushed before and after), stopped on exit."""
    data.mkdir(parents=True, exist_ok=True)
    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    env = dict(os.environ)
    env.update(
        {
            "ATOMMEM_BROKER__URL": redis_url,
            "ATOMMEM_STORE__QDRANT_PATH": str(data / "qdrant"),
            "ATOMMEM_API__ADMIN_KEY": ADMIN_KEY,
            "ATOMMEM_API__WRITES_PER_MINUTE": str(WRITES_PER_MINUTE),
            "ATOMMEM_API__MAX_BODY_BYTES": "200000",
        }
    )
    worker = WorkerProcess(env, data / "worker.log", "ingest,extract,memory,profile,query")
    port = free_port()
    api_log = (data / "api.log").open("wb")
    api = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "--factory", "api.main:create_app",
         "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"],
        cwd=ROOT, env=env, stdout=api_log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        worker.wait_ready()
        api_ready(url, api, data / "api.log")
        yield Stack(url=url, env=env, data=data, redis=client, worker=worker)
    finally:
        api.terminate()
        api.wait(30)
        api_log.close()
        worker.stop()
        with contextlib.suppress(redis.ConnectionError):  # a test stopped this Redis for good
            client.flushdb()
        client.close()


def wait_jobs(
    client: httpx.Client, job_ids: list[str], timeout: float = 300
) -> list[dict[str, Any]]:
    """The jobs once each is done or failed, polled over HTTP."""
    deadline = time.monotonic() + timeout
    while True:
        jobs = [client.get(f"/v1/jobs/{j}").json() for j in job_ids]
        if all(j["state"] in ("done", "failed") for j in jobs):
            return jobs
        assert time.monotonic() < deadline, jobs
        time.sleep(0.2)
