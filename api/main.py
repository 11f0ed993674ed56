"""The AtomMem HTTP API: `uvicorn --factory api.main:create_app`.

A thin producer: it validates, authenticates and confines every request to the caller's
tenant, then sends tasks by name. Reads and erasure run on the workers, which own the
store; the API itself never opens Qdrant.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import anyio.to_thread
from fastapi import FastAPI
from starlette.routing import Route

from api import errors, ui
from api.body import BodyGate
from api.deps import Services
from api.mcp.http import McpEndpoint
from api.routes import (
    admin,
    executor,
    health,
    memory,
    metrics,
    prom,
    query,
    sessions,
    spaces,
)
from common.observability import logs, tracing
from common.settings import Settings, get_settings


def create_app(
    settings: Settings | None = None, services: Callable[[Settings], Services] = Services.build
) -> FastAPI:
    """The app; `services` builds what its routes use on startup (the Redis queues' by
    default; `atommem serve` passes the embedded store's, `cli.serve`)."""
    settings = settings or get_settings()
    mcp = McpEndpoint()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.services = services(settings)
        # The MCP tools' waits on workers run in anyio's default pool (the SDK's); they hold
        # at most `api.wait_slots` of its threads, and the pool keeps its own 40 beside them
        # for key checks and Redis-only work (`api.capacity`).
        anyio.to_thread.current_default_thread_limiter().total_tokens += settings.api.wait_slots
        async with mcp.running():  # the MCP transport's tasks live as long as the app
            yield
        app.state.services.close()

    app = FastAPI(
        title="AtomMem",
        version="0.1.0",
        description="Long-term memory for LLM agents: sessions in, facts, events and "
        "temporal profiles out. Every route but health needs an API key. Every error has "
        'one body, `{"detail": "..."}`.',
        lifespan=lifespan,
        responses=errors.declared(422),  # in place of FastAPI's own, a second error shape
        # FastAPI's /docs and /redoc load their scripts from a CDN, on the origin /ui and its
        # keys live on; no installed package ships them, so they are not served.
        # /openapi.json stays: any OpenAPI viewer or client generator reads it.
        docs_url=None,
        redoc_url=None,
    )
    for router in (health, spaces, sessions, memory, query, admin, metrics, executor):
        app.include_router(router.router)
    ui.mount(app)  # the web inspector at /ui
    app.router.routes.append(Route("/mcp", mcp))  # the MCP server (docs/mcp.md)
    app.add_middleware(BodyGate, limit=settings.api.max_body_bytes)
    prom.install(app, settings)  # GET /metrics, requests counted (docs/operations.md)
    errors.install(app)
    # Traces and JSON logs (docs/operations.md, "Traces and logs"): a log scope per request
    # the auth dependency fills with the tenant, and a span per request the tasks continue.
    app.add_middleware(logs.RequestScope)
    tracing.instrument_app(app, settings.tracing)
    if settings.log.format == "json":
        logs.for_uvicorn()
    return app
