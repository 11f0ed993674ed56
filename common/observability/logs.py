"""Logs as JSON lines: each record one object with the ids of the work it belongs to (tenant,
space, session, job, task, trace), held in a context variable the task or the request sets.

Only the record's own message and those ids are written: never a record's `extra` data
(Celery passes a task's arguments there, and they hold the turns), so the text of a turn or
a fact never reaches a log by this formatter (erasure: an erased text must not survive in a
log file).
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar, Token
from datetime import UTC, datetime
from typing import Any

from opentelemetry import trace

# The ids of the current task or request. A request's scope is one dict its dependencies
# fill in place: FastAPI runs them in threads on copies of the context, which share the dict.
_ids: ContextVar[dict[str, str | int] | None] = ContextVar("atommem_log_ids", default=None)

# What `bind` keeps: ids only, so a caller passing a payload's field by mistake writes nothing.
FIELDS = (
    *("tenant", "space", "session_id", "job_id", "chunk", "chunks"),
    *("task_id", "task", "trace_id"),
)

# Loggers that write request bodies (a turn's text on its way to a model) at DEBUG: held at
# INFO whatever the worker's level.
CHATTY = ("openai", "httpx", "httpx2", "httpcore")


def current() -> Mapping[str, str | int]:
    return _ids.get() or {}


def _clean(ids: Mapping[str, object]) -> dict[str, str | int]:
    return {k: v for k, v in ids.items() if k in FIELDS and isinstance(v, str | int)}


def bind(**ids: object) -> None:
    """Add ids to the current scope (opening one if none is open)."""
    found = _ids.get()
    if found is None:
        _ids.set(_clean(ids))
    else:
        found.update(_clean(ids))


def open_scope(**ids: object) -> Token[dict[str, str | int] | None]:
    """A fresh scope (a task starting); `close_scope` with the token ends it."""
    return _ids.set(_clean(ids))


def close_scope(token: Token[dict[str, str | int] | None]) -> None:
    _ids.reset(token)


@contextmanager
def within(**ids: object) -> Iterator[None]:
    """These ids for a stage of a job: added to the open scope, a task's, so that its
    remaining lines (Celery's own end line included) name the step a lane task ran; with no
    scope open (the embedded pipeline), for the block only."""
    found = _ids.get()
    if found is not None:
        found.update(_clean(ids))
        yield
        return
    token = _ids.set(_clean(ids))
    try:
        yield
    finally:
        _ids.reset(token)


def payload_ids(payload: object) -> dict[str, str]:
    """The ids in a task's raw payload (a dict off the wire, not yet validated)."""
    if not isinstance(payload, Mapping):
        return {}
    session = payload.get("session")
    found = {
        "tenant": payload.get("tenant"),
        "space": payload.get("space"),
        "job_id": payload.get("job_id"),
        "session_id": session.get("session_id")
        if isinstance(session, Mapping)
        else payload.get("session_id"),
    }
    return {k: v for k, v in found.items() if isinstance(v, str)}


class RequestScope:
    """ASGI middleware: each HTTP request logs in a scope of its own, which the auth
    dependency fills with the caller's tenant (and the route's space)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        token = open_scope()
        try:
            await self.app(scope, receive, send)
        finally:
            close_scope(token)


def line(level: str, logger: str, message: str, created: float | None = None) -> str:
    """One log line as the formatter writes it, for what bypasses logging (signal handlers)."""
    return json.dumps(_record(level, logger, message, created), ensure_ascii=False, default=str)


def _record(level: str, logger: str, message: str, created: float | None) -> dict[str, Any]:
    when = datetime.now(UTC) if created is None else datetime.fromtimestamp(created, UTC)
    out: dict[str, Any] = {
        "ts": when.isoformat(timespec="milliseconds"),
        "level": level,
        "logger": logger,
        "message": message,
        **current(),
    }
    span = trace.get_current_span().get_span_context()
    if "trace_id" not in out and span.is_valid:
        out["trace_id"] = trace.format_trace_id(span.trace_id)
    return out


class JsonFormatter(logging.Formatter):
    """One JSON object a line: ts, level, logger, message, the ids known, the trace id (the
    job's stage's, else the current span's), and the traceback of an exception (its type and
    message, never the task's arguments)."""

    def format(self, record: logging.LogRecord) -> str:
        out = _record(record.levelname, record.name, record.getMessage(), record.created)
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        if record.stack_info:
            out["stack"] = self.formatStack(record.stack_info)
        return json.dumps(out, ensure_ascii=False, default=str)


def use_json(loggers: Iterable[logging.Logger]) -> None:
    """Write these loggers' handlers' lines as JSON (the handlers Celery or uvicorn set up
    stay: where the lines go does not change, only their shape)."""
    formatter = JsonFormatter()
    for logger in loggers:
        for handler in logger.handlers:
            handler.setFormatter(formatter)
    for name in CHATTY:
        chatty = logging.getLogger(name)
        if chatty.level < logging.INFO:
            chatty.setLevel(logging.INFO)


def for_uvicorn() -> None:
    """The API's lines as JSON under uvicorn: uvicorn's own loggers (set up before the app
    factory runs, so their handlers exist by now), and a JSON handler on stderr for the root
    when nothing set one up (the API's own loggers; uvicorn's config leaves the root alone,
    and a root that has handlers, a test runner's, is left as it is)."""
    use_json(logging.getLogger(name) for name in ("uvicorn", "uvicorn.error", "uvicorn.access"))
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(JsonFormatter())
        root.addHandler(handler)
