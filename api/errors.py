"""Every refusal and failure as one JSON body, `{"detail": "..."}`: the status each error
maps to, the handlers that write it, and the declarations that put it in the OpenAPI spec."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import celery.exceptions
import kombu.exceptions
import pydantic
import redis.exceptions
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException
from starlette.routing import Match

from common.errors import AtomMemError, all_errors, error_kind
from common.llm.budget import ModelBusy
from common.llm.transport import LLMError
from common.models.responses import ErrorBody
from common.service import OverQuota

NO_WORKER = "no worker answered in time; check that workers run"  # the 504's detail
STATUS = {"not_found": 404, "conflict": 409, "invalid": 422, "unavailable": 503, "error": 400}
RETRY_AFTER_S = 5
_RETRY_AFTER = {
    "Retry-After": {
        "description": "seconds to wait before trying again",
        "schema": {"type": "integer", "minimum": 1},
        "required": True,
    }
}
WHY = {
    400: "The body is not JSON text in UTF-8: malformed, nested too deep, a lone surrogate",
    401: "No API key, or an unknown or revoked one",
    403: "This key may not use the route: the admin key holds no memory, a tenant's key "
    "manages no tenants",
    404: "Nothing of that name or id for this key (another tenant's is a 404 too)",
    409: "It clashes with the current state: the name is taken, the session was submitted "
    "before with other content, its ingest is still running, or a fact is corrected to what "
    "another fact already says",
    413: "The body is over `api.max_body_bytes`",
    422: "The request breaks the schema or a rule the schema cannot state; the detail names "
    "each field and what is wrong with it, separated by '; '",
    429: "Over the tenant's writes per minute (refused writes do not count)",
    503: "Redis, which holds keys, jobs and queues, does not answer, or the store cannot "
    "write (its disk is full or read-only)",
    504: "No worker answered in time",
}
# Every route: a body (if any) passes the gate, a key is checked in Redis.
COMMON = (400, 401, 403, 413, 422, 503)


def declared(*codes: int) -> dict[int | str, dict[str, object]]:
    """The OpenAPI `responses` entries of these error statuses, all with the one body."""
    out: dict[int | str, dict[str, object]] = {}
    for code in codes:
        entry: dict[str, object] = {"model": ErrorBody, "description": WHY[code]}
        if code in (429, 503, 504):
            entry["headers"] = _RETRY_AFTER
        out[code] = entry
    return out


def allowed(request: Request) -> list[str]:
    """Every method some route takes at the request's path."""
    methods: set[str] = set()
    for route in request.app.router.routes:
        match, _ = route.matches({**request.scope, "method": "GET"})
        if match is not Match.NONE:
            methods |= getattr(route, "methods", None) or set()
    return sorted(methods)


def reply(status: int, detail: str, headers: Mapping[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"detail": detail}, status_code=status, headers=headers)


def install(app: FastAPI) -> None:
    """Route every error the API expects to its status and the one body."""
    retry = {"Retry-After": str(RETRY_AFTER_S)}

    async def on_http(request: Request, exc: HTTPException) -> Response:
        if exc.status_code in (204, 304):
            return Response(status_code=exc.status_code, headers=exc.headers)
        headers = dict(exc.headers or {})
        if exc.status_code == 405:  # Starlette names only the first route of the path
            headers["Allow"] = ", ".join(allowed(request))
        return reply(exc.status_code, str(exc.detail), headers)

    async def on_invalid(
        _: Request, exc: RequestValidationError | pydantic.ValidationError
    ) -> JSONResponse:
        return reply(422, all_errors(exc.errors()))

    async def on_memory(_: Request, exc: AtomMemError) -> JSONResponse:
        status = STATUS[error_kind(exc)]
        return reply(status, str(exc), retry if status == 503 else None)

    async def on_quota(_: Request, exc: OverQuota) -> JSONResponse:
        return reply(429, str(exc), {"Retry-After": str(exc.retry_after)})

    async def on_llm(_: Request, exc: LLMError) -> JSONResponse:
        return reply(502, str(exc))

    async def on_timeout(_: Request, exc: Exception) -> JSONResponse:
        return reply(504, NO_WORKER, retry)

    async def on_unreachable(_: Request, exc: Exception) -> JSONResponse:
        return reply(503, f"Redis does not answer ({type(exc).__name__}); try again", retry)

    async def on_crash(_: Request, exc: Exception) -> JSONResponse:
        # a bug: the body keeps the one shape, the traceback goes to the server's log
        return reply(500, f"internal error ({type(exc).__name__}); the server log has it")

    handlers: dict[type[Exception], Callable[[Request, Any], Awaitable[Response]]] = {
        HTTPException: on_http,
        RequestValidationError: on_invalid,
        pydantic.ValidationError: on_invalid,
        AtomMemError: on_memory,
        OverQuota: on_quota,
        LLMError: on_llm,
        ModelBusy: on_memory,  # a question the model endpoint cannot take now: 503
        celery.exceptions.TimeoutError: on_timeout,
        TimeoutError: on_timeout,
        redis.exceptions.ConnectionError: on_unreachable,
        redis.exceptions.TimeoutError: on_unreachable,
        kombu.exceptions.OperationalError: on_unreachable,
        ConnectionError: on_unreachable,
        Exception: on_crash,
    }
    for kind, handler in handlers.items():
        app.add_exception_handler(kind, handler)
