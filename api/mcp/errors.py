"""Failures as the model calling a tool reads them: what is wrong, in the API's words, with
the field named where one is at fault."""

from __future__ import annotations

import celery.exceptions
import httpx
import kombu.exceptions
import pydantic
import redis.exceptions
from mcp.server.mcpserver.exceptions import ToolError

from api.client import ApiError, RateLimited, Unavailable
from api.errors import NO_WORKER
from common.errors import AtomMemError, error_kind, first_error
from common.llm.transport import LLMError
from common.service import OverQuota

# Each kind of failure (`common.errors.KINDS`) as the caller reads it.
_WORDS = {"not_found": "not found", "conflict": "conflict", "invalid": "invalid"}
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
    if isinstance(exc, LLMError):
        return f"the model backend failed: {exc}"
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
