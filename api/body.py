"""The gate every request body passes before routing: at most `limit` bytes, by its
Content-Length or as it streams (413), and JSON text in UTF-8 (400 saying what is wrong)."""

from __future__ import annotations

import json
import re
from typing import Any

import anyio
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

MAX_DEPTH = 32  # the deepest body a route takes is 4 levels
_SURROGATE = re.compile("[\ud800-\udfff]")
_ESCAPED_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]")


def problem(body: bytes) -> str | None:
    """Why `body` is not JSON text in UTF-8 a route could take, or None."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"the body must be JSON text encoded as UTF-8 (byte {exc.start} is not UTF-8)"
    if "\x00" in text:  # never in JSON text: UTF-16 or UTF-32 that happens to decode
        return "the body must be JSON text encoded as UTF-8 (it holds NUL bytes)"
    try:
        value = json.loads(text)
    except RecursionError:
        return f"the body is nested deeper than {MAX_DEPTH} levels"
    except json.JSONDecodeError as exc:
        return f"the body is not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
    if _too_deep(value):
        return f"the body is nested deeper than {MAX_DEPTH} levels"
    if _ESCAPED_SURROGATE.search(body):  # valid UTF-8 spells one only as a JSON escape
        return _surrogate(value)
    return None


def _too_deep(value: Any) -> bool:
    """Whether containers nest past MAX_DEPTH; walks containers only, without recursion."""
    if not isinstance(value, list | dict):
        return False
    todo: list[tuple[Any, int]] = [(value, 0)]
    while todo:
        item, depth = todo.pop()
        for child in item.values() if isinstance(item, dict) else item:
            if isinstance(child, list | dict):
                if depth + 1 > MAX_DEPTH:
                    return True
                if child:  # an empty one nests no further
                    todo.append((child, depth + 1))
    return False


def _surrogate(value: Any) -> str | None:
    """Where a string holds a lone surrogate (JSON escapes can spell one, which no encoder
    writes back), or None."""
    todo: list[tuple[Any, str]] = [(value, "body")]
    while todo:
        item, where = todo.pop()
        if isinstance(item, str) and _SURROGATE.search(item):
            return f"{where} holds a lone surrogate: text must be valid Unicode"
        if isinstance(item, list):
            todo += [(v, f"{where}.{i}") for i, v in enumerate(item)]
        elif isinstance(item, dict):
            for key, v in item.items():
                if _SURROGATE.search(key):
                    return f"a key in {where} holds a lone surrogate: text must be valid Unicode"
                todo.append((v, f"{where}.{key}"))
    return None


class BodyGate:
    """Reads the whole body (bounded), refuses it or hands it on unchanged."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await self._refuse(send, 413, f"request body over {self.limit} bytes")
            return
        chunks: list[bytes] = []
        seen = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return  # the client left
            chunk = message.get("body", b"")
            seen += len(chunk)
            if seen > self.limit:
                await self._refuse(send, 413, f"request body over {self.limit} bytes")
                return
            chunks.append(chunk)
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        # Off the event loop: a large body takes a while to check, and /healthz must answer.
        why = await anyio.to_thread.run_sync(problem, body) if body else None
        if why is not None:
            await self._refuse(send, 400, why)
            return
        handed = False

        async def replay() -> Message:
            nonlocal handed
            if handed:
                return await receive()
            handed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)

    async def _refuse(self, send: Send, status: int, detail: str) -> None:
        response = JSONResponse({"detail": detail}, status_code=status)
        await response({"type": "http"}, _nothing, send)


async def _nothing() -> Message:
    return {"type": "http.disconnect"}
