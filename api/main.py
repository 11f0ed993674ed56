"""The AtomMem HTTP API: `uvicorn --factory api.main:create_app`.

A thin producer: it validates, authenticates and confines every request to the caller's
tenant, then sends tasks by name. Reads and erasure run on the workers, which own the
store; the API itself never opens Qdrant.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import celery.exceptions
import pydantic
from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.deps import Services
from api.routes import admin, health, memory, query, sessions, spaces
from common.errors import AtomMemError, error_kind
from common.llm.transport import LLMError
from common.settings import Settings, get_settings

STATUS = {"not_found": 404, "conflict": 409, "invalid": 422, "error": 400}


class BodyLimit:
    """Refuse a body over `limit` bytes with 413, by its Content-Length or while it streams."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await self._refuse(send)
            return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.limit:
                raise _TooLarge
            return message

        try:
            await self.app(scope, counted, send)
        except _TooLarge:
            await self._refuse(send)

    async def _refuse(self, send: Send) -> None:
        response = JSONResponse(
            {"detail": f"request body over {self.limit} bytes"}, status_code=413
        )
        await response({"type": "http"}, _nothing, send)


class _TooLarge(Exception):
    pass


async def _nothing() -> Message:
    return {"type": "http.disconnect"}


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.services = Services.build(settings)
        yield
        app.state.services.redis.close()

    app = FastAPI(
        title="AtomMem",
        version="0.1.0",
        description="Long-term memory for LLM agents: sessions in, facts, events and "
        "temporal profiles out. Every route but health needs an API key.",
        lifespan=lifespan,
    )
    for router in (health, spaces, sessions, memory, query, admin):
        app.include_router(router.router)
    app.add_middleware(BodyLimit, limit=settings.api.max_body_bytes)
    _handlers(app)
    return app


def _handlers(app: FastAPI) -> None:
    def reply(status: int, detail: str, headers: dict[str, str] | None = None) -> JSONResponse:
        return JSONResponse({"detail": detail}, status_code=status, headers=headers)

    Handler = Callable[[Request, Any], Awaitable[Response]]
    handlers: dict[type[Exception], Handler] = {}

    async def on_llm(_: Request, exc: LLMError) -> JSONResponse:
        return reply(502, str(exc))

    async def on_memory(_: Request, exc: AtomMemError) -> JSONResponse:
        return reply(STATUS[error_kind(exc)], str(exc))

    async def on_invalid(_: Request, exc: pydantic.ValidationError) -> JSONResponse:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        return reply(422, f"{where}: {first['msg']}" if where else str(first["msg"]))

    async def on_timeout(_: Request, exc: Exception) -> JSONResponse:
        return reply(
            504, "no worker answered in time; check that workers run", {"Retry-After": "5"}
        )

    async def on_http(request: Request, exc: StarletteHTTPException) -> Response:
        if exc.status_code == 400 and exc.detail == "There was an error parsing the body":
            return reply(400, "the body must be JSON text encoded as UTF-8")
        return await http_exception_handler(request, exc)

    handlers[StarletteHTTPException] = on_http
    handlers[LLMError] = on_llm
    handlers[AtomMemError] = on_memory
    handlers[pydantic.ValidationError] = on_invalid
    handlers[celery.exceptions.TimeoutError] = on_timeout
    handlers[TimeoutError] = on_timeout
    for kind, handler in handlers.items():
        app.add_exception_handler(kind, handler)
