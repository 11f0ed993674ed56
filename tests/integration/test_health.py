"""Readiness against a real Redis: ready with no worker consuming the query queue (a query
backlog or a worker outage never takes API pods out), and the deep check still sees the
missing worker."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.helpers.probes import api, while_threads_are_busy
from tests.helpers.redis_server import RedisServer, start_redis

pytestmark = pytest.mark.integration


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A Redis of this test's own: nothing consumes its queues."""
    server = start_redis(tmp_path / "redis")
    yield server
    server.stop()


def test_readyz_is_ready_with_no_worker_while_every_request_thread_is_busy(
    private_redis: RedisServer,
) -> None:
    app = api(private_redis.url())
    reply = asyncio.run(while_threads_are_busy(app, "/readyz"))
    assert reply is not None, "/readyz waited for a request thread"
    assert reply.status_code == 200, reply.text
    assert reply.json() == {"status": "ready", "redis": True, "waiting": True}
    assert private_redis.client().llen("query") == 0, "readiness sent nothing to a queue"


def test_deep_readiness_reports_the_missing_worker(private_redis: RedisServer) -> None:
    app = api(private_redis.url(), ping_timeout_s=0.5)

    async def deep() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
            return await client.get("/readyz", params={"deep": "true"})

    reply = asyncio.run(deep())
    assert reply.status_code == 503
    body = reply.json()
    assert body["redis"] is True and body["worker"] is False and body["store"] is False
    assert body["worker_error"]
