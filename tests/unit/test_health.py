"""The API's probes answer from the event loop: while every request thread is blocked, and
without a worker or a queue behind them."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import anyio.to_thread
import httpx
from fastapi import FastAPI

from api.deps import Services
from api.main import create_app
from common.settings import Settings
from tests.redis_server import free_port

# Bounds a request that would otherwise wait for a thread forever; answering takes
# milliseconds, so this is a deadlock guard, not a timing threshold.
PATIENCE_S = 20.0


def api(broker_url: str, **api_settings: Any) -> FastAPI:
    settings = Settings.model_validate({"broker": {"url": broker_url}, "api": api_settings})
    app = create_app(settings)
    app.state.services = Services.build(settings)  # ASGITransport runs no lifespan
    return app


async def while_threads_are_busy(app: FastAPI, path: str) -> httpx.Response | None:
    """GET `path` while every thread of the request pool is held by a blocking sync route;
    None when it did not answer until they were released."""
    release = threading.Event()
    entered = threading.Semaphore(0)

    def slow() -> dict[str, str]:
        entered.release()
        release.wait(PATIENCE_S * 2)
        return {}

    app.add_api_route("/slow", slow)
    threads = int(anyio.to_thread.current_default_thread_limiter().total_tokens)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
        blocked = [asyncio.create_task(client.get("/slow")) for _ in range(threads + 5)]
        for _ in range(threads):  # every thread is inside slow(); 5 more requests queue
            await asyncio.to_thread(entered.acquire)
        probe = asyncio.create_task(client.get(path))
        done, _ = await asyncio.wait({probe}, timeout=PATIENCE_S)
        release.set()
        await asyncio.gather(*blocked)
        answer = await probe
    return answer if probe in done else None


def test_healthz_answers_while_every_request_thread_is_busy() -> None:
    app = api(f"redis://127.0.0.1:{free_port()}/0")
    reply = asyncio.run(while_threads_are_busy(app, "/healthz"))
    assert reply is not None, "/healthz waited for a request thread"
    assert reply.status_code == 200 and reply.json() == {"status": "ok"}


def test_readyz_answers_not_ready_while_every_thread_is_busy_and_redis_is_down() -> None:
    app = api(f"redis://127.0.0.1:{free_port()}/0")  # nothing listens there
    reply = asyncio.run(while_threads_are_busy(app, "/readyz"))
    assert reply is not None, "/readyz waited for a request thread"
    assert reply.status_code == 503
    body = reply.json()
    assert body["status"] == "not ready" and body["redis"] is False
    assert "ConnectionError" in body["redis_error"]
    assert "worker" not in body, "readiness never reaches for a worker"
