"""The API in-process for its probes (no lifespan: the services are built here), and a request
made while every thread of its request pool is held."""

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
