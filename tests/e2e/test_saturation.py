"""Slow work never locks out other tenants: with no query worker, a tenant's searches wait on
the queue for their whole timeout; meanwhile another tenant's Redis-only routes and MCP
`tools/list` answer, each tenant's share and the process's slots are enforced, and /readyz
reports the saturated process. The API runs under uvicorn on a private Redis, with no worker
at all (nothing consumes the query queue)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import redis

from common.queues import Queue
from tests.helpers.ports import free_port
from tests.helpers.redis_server import start_redis
from tests.helpers.stack import ADMIN_KEY, api_ready
from workers.launch import ROOT

pytestmark = pytest.mark.integration

PER_TENANT = 40  # tenant A's share: more waits than anyio's default pool has threads
SLOTS = 44  # the process's: A's 40 and 4 of tenant C's
QUERY_TIMEOUT_S = 30  # how long an admitted search waits before its 504
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}
TOOLS_LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}


@dataclass
class Api:
    url: str
    redis: redis.Redis

    def client(self, key: str) -> httpx.Client:
        # A long timeout: a request queued behind the searches answers late, never times out
        return httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {key}"}, timeout=120
        )

    def key(self, tenant: str) -> str:
        with self.client(ADMIN_KEY) as admin:
            assert admin.post("/v1/admin/tenants", json={"name": tenant}).status_code == 201
            return str(admin.post(f"/v1/admin/tenants/{tenant}/keys").json()["api_key"])

    def queued_queries(self) -> int:
        """Messages waiting in the query queue (kombu keeps one list per priority step)."""
        names = self.redis.scan_iter(match=f"{Queue.QUERY.value}*", _type="list")
        return sum(int(self.redis.llen(name)) for name in names)


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Api]:
    server = start_redis(tmp_path / "redis", appendonly=False)
    env = dict(os.environ)
    env.update(
        {
            "ATOMMEM_BROKER__URL": server.url(),
            "ATOMMEM_API__ADMIN_KEY": ADMIN_KEY,
            "ATOMMEM_API__QUERY_TIMEOUT_S": str(QUERY_TIMEOUT_S),
            "ATOMMEM_API__WAIT_SLOTS": str(SLOTS),
            "ATOMMEM_API__WAITS_PER_TENANT": str(PER_TENANT),
        }
    )
    port = free_port()
    log_path = tmp_path / "api.log"
    log = log_path.open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "--factory", "api.main:create_app",
         "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    client = server.client()
    try:
        url = f"http://127.0.0.1:{port}"
        api_ready(url, proc, log_path)
        yield Api(url=url, redis=client)
    finally:
        proc.terminate()
        proc.wait(60)
        log.close()
        client.close()
        server.stop()


def _until(check: Callable[[], bool], what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.05)


def _searches(
    pool: ThreadPoolExecutor, client: httpx.Client, n: int
) -> list[Future[httpx.Response]]:
    body = {"question": "Where does Priya live?"}
    return [pool.submit(client.post, "/v1/spaces/notes/search", json=body) for _ in range(n)]


def _statuses(futures: list[Future[httpx.Response]]) -> Counter[int]:
    return Counter(f.result().status_code for f in futures)


def test_waiting_searches_leave_other_tenants_and_readiness_answering(api: Api) -> None:
    a, b, c = (api.client(api.key(name)) for name in ("alpha", "beta", "gamma"))
    with a, b, c, ThreadPoolExecutor(max_workers=64) as pool:
        flood = _searches(pool, a, PER_TENANT + 5)
        # A's searches are in flight once their tasks sit in the query queue, where nothing
        # takes them: each blocks its request until QUERY_TIMEOUT_S, then answers 504.
        _until(lambda: api.queued_queries() >= PER_TENANT, f"{PER_TENANT} searches queued")

        # Redis-only routes of another tenant, and its MCP tool listing, answer while every
        # admitted search still waits (none has answered but the ones refused at once).
        jobs = b.get("/v1/jobs")
        job = b.get("/v1/jobs/no-such-job")
        tools = b.post("/mcp", json=TOOLS_LIST, headers=MCP_HEADERS)
        answered = [f.result().status_code for f in flood if f.done()]
        assert answered.count(504) == 0, f"B's reads waited for A's searches: {answered}"
        assert jobs.status_code == 200 and jobs.json() == {"items": []}
        assert job.status_code == 404
        assert tools.status_code == 200, tools.text
        assert len(tools.json()["result"]["tools"]) == 15
        assert sum(1 for f in flood if not f.done()) >= PER_TENANT

        # A tenant's share: the searches beyond it are refused at once, with Retry-After.
        _until(lambda: sum(1 for f in flood if f.done()) == 5, "A's 5 over its share refused")
        refused = [f.result() for f in flood if f.done()]
        assert {r.status_code for r in refused} == {429}
        assert all(int(r.headers["Retry-After"]) >= 1 for r in refused)
        assert "api.waits_per_tenant" in refused[0].json()["detail"]

        # C takes the process's last 4 slots; its fifth search is refused with 503, and the
        # process reports itself saturated.
        more = _searches(pool, c, SLOTS - PER_TENANT + 1)
        _until(lambda: sum(1 for f in more if f.done()) == 1, "C's search over the slots")
        (full,) = [f.result() for f in more if f.done()]
        assert full.status_code == 503 and int(full.headers["Retry-After"]) >= 1
        assert "api.wait_slots" in full.json()["detail"]
        ready = httpx.get(f"{api.url}/readyz", timeout=30)
        assert ready.status_code == 503, ready.text
        assert ready.json()["waiting"] is False and ready.json()["redis"] is True
        assert "saturated" in ready.json()["waiting_error"]

        # Saturated, B's Redis-only routes still answer, and its MCP search is refused in
        # words rather than queued.
        assert b.get("/v1/jobs").status_code == 200
        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "search", "arguments": {"space": "notes", "question": "who?"}},
        }
        refused_tool = b.post("/mcp", json=call, headers=MCP_HEADERS).json()["result"]
        assert refused_tool["isError"] is True
        assert "api.wait_slots" in refused_tool["content"][0]["text"]

        # Every admitted search ends in its 504, and the slots come back with them.
        assert _statuses(flood) == {504: PER_TENANT, 429: 5}
        assert _statuses(more) == {504: SLOTS - PER_TENANT, 503: 1}
    _until(lambda: httpx.get(f"{api.url}/readyz", timeout=30).status_code == 200, "ready again")
