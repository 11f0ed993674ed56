"""Failures as the model calling a tool reads them: what is wrong, in the API's words, with
the field named where one is at fault."""

from __future__ import annotations

import json
import re
from typing import Any

import celery.exceptions
import httpx
import kombu.exceptions
import pydantic
import redis.exceptions
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError

from api.client import ApiError, RateLimited, Unavailable
from api.errors import NO_WORKER
from common.errors import AtomMemError, error_kind, first_error
from common.llm.transport import LLMError
from common.service import OverQuota

# Each kind of failure (`common.errors.KINDS`) as the caller reads it.
_WORDS = {
    "not_found": "not found",
    "conflict": "conflict",
    "invalid": "invalid",
    "unavailable": "unavailable",
}
_UNREACHABLE = (
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    kombu.exceptions.OperationalError,
    ConnectionError,
)


def _remote(exc: ApiError) -> str:
    if isinstance(exc, RateLimited | Unavailable):
        kind = "rate limited" if isinstance(exc, RateLimited) else "unavailable"
        return f"{kind} (HTTP {exc.status}): {exc.detail}; try again in {exc.retry_after:g}s"
    return f"{_WORDS.get(error_kind(exc), 'error')} (HTTP {exc.status}): {exc.detail}"


def explain(exc: BaseException | None) -> str | None:
    """`exc` in words for the caller, or None for a bug: the SDK then answers only that the
    tool failed, and logs the traceback."""
    if isinstance(exc, ToolError):  # a tool's own refusal, already in words
        return str(exc)
    if isinstance(exc, pydantic.ValidationError):
        return f"invalid: {first_error(exc.errors())}"
    if isinstance(exc, ApiError):  # the server's answer, through the SDK
        return _remote(exc)
    if isinstance(exc, OverQuota):
        return f"rate limited: {exc}; try again in {exc.retry_after}s"
    if isinstance(exc, LLMError) and error_kind(exc) == "error":
        return f"the model backend failed: {exc}"  # a busy model (ModelBusy) reads as below
    if isinstance(exc, AtomMemError):
        kind = _WORDS.get(error_kind(exc))
        return f"{kind}: {exc}" if kind else str(exc)
    if isinstance(exc, _UNREACHABLE):
        return f"unavailable: Redis does not answer ({type(exc).__name__}); try again"
    if isinstance(exc, TimeoutError | celery.exceptions.TimeoutError):
        return f"unavailable: {NO_WORKER}"
    if isinstance(exc, httpx.TransportError):
        return f"unavailable: the AtomMem server does not answer ({type(exc).__name__}: {exc})"
    return None


_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")


def _request_id(message: Any) -> str | int | None:
    value = message.get("id") if isinstance(message, dict) else None
    return value if isinstance(value, str | int) and not isinstance(value, bool) else None


def unreadable(exc: Exception) -> JSONRPCError:
    """The JSON-RPC error that answers a line the transport could not read as a message: a
    parse error (-32700) for what is not JSON text, an invalid request (-32600) for JSON that
    is no message or holds a lone surrogate. It carries the request's id where the line's
    JSON names one (`null` otherwise), so the client waiting on that request hears back."""
    errors = exc.errors() if isinstance(exc, pydantic.ValidationError) else []
    if not errors:  # not the parser's refusal: the transport failed to read the line
        error = ErrorData(code=PARSE_ERROR, message=f"Parse error: {type(exc).__name__}")
        return JSONRPCError(jsonrpc="2.0", id=None, error=error)
    line = errors[0].get("input")
    if not isinstance(line, str):  # JSON (parsed), but no JSON-RPC message; no batches
        why = "Invalid request: not a JSON-RPC 2.0 request, notification or response"
        error = ErrorData(code=INVALID_REQUEST, message=why)
        return JSONRPCError(jsonrpc="2.0", id=_request_id(line), error=error)
    text = line.strip()
    try:  # Python reads JSON as the SDK's parser refuses it: lone surrogates, trailing bytes
        message, end = json.JSONDecoder().raw_decode(text)
    except (ValueError, RecursionError):
        error = ErrorData(code=PARSE_ERROR, message="Parse error: the line is not JSON text")
        return JSONRPCError(jsonrpc="2.0", id=None, error=error)
    request = _request_id(message)
    if end < len(text):
        why = f"Parse error: {text[end:][:8]!r} follows the JSON text (one message a line)"
        return JSONRPCError(
            jsonrpc="2.0", id=request, error=ErrorData(code=PARSE_ERROR, message=why)
        )
    if _SURROGATE.search(text):  # JSON text can spell one only as an escape
        why = "Invalid request: the message holds a lone surrogate; text must be valid Unicode"
    else:
        why = f"Invalid request: not a JSON-RPC message ({errors[0].get('msg')})"
    return JSONRPCError(
        jsonrpc="2.0", id=request, error=ErrorData(code=INVALID_REQUEST, message=why)
    )
