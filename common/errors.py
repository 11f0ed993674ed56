"""Errors a user can act on; each message names the problem."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class AtomMemError(Exception):
    """Base of every expected, user-facing failure."""


class InvalidInput(AtomMemError):
    """Input that does not match a documented format."""


class NotFound(AtomMemError):
    """What was asked for does not exist (for this tenant)."""


class Conflict(AtomMemError):
    """The request clashes with the current state (exists already, still in progress)."""


class Unavailable(AtomMemError):
    """Storage cannot take the request now (its disk is full or read-only); try again later.
    The message names no server path."""


class UnknownSpace(NotFound):
    def __init__(self, tenant: str, space: str) -> None:
        super().__init__(f"space {space!r} does not exist for tenant {tenant!r}")
        self.tenant = tenant
        self.space = space


class SpaceExists(Conflict):
    pass


class SessionConflict(Conflict):
    """A session id that was committed before with different content."""


# A failure's kind as it crosses the wire (a task's reply, an HTTP status, an MCP tool error),
# and the class each kind comes back as; anything else is "error".
KINDS: dict[str, type[AtomMemError]] = {
    "not_found": NotFound,
    "conflict": Conflict,
    "invalid": InvalidInput,
    "unavailable": Unavailable,
}


def error_kind(exc: AtomMemError) -> str:
    """The class of a failure as it crosses the wire: not_found, conflict, invalid,
    unavailable, error."""
    return next((kind for kind, cls in KINDS.items() if isinstance(exc, cls)), "error")


def failure(exc: AtomMemError) -> dict[str, str]:
    """A failure as a task's reply: {"error": message, "kind": error_kind}."""
    return {"error": str(exc), "kind": error_kind(exc)}


def raise_failure(reply: object) -> None:
    """A task's {"error", "kind"} reply as the exception of its kind; any other reply passes."""
    if isinstance(reply, dict) and "error" in reply:
        raise KINDS.get(str(reply.get("kind")), AtomMemError)(str(reply["error"]))


def all_errors(errors: Sequence[Any]) -> str:
    """Every error of a pydantic validation failure in words, in one line: a body that breaks
    several rules is fixed in one try."""
    return "; ".join(first_error([error]) for error in errors)


def first_error(errors: Sequence[Any]) -> str:
    """A pydantic validation failure in words: where (`body.turns.0.text`) and what."""
    first = errors[0]
    where = ".".join(str(p) for p in first.get("loc", ()))
    return f"{where}: {first['msg']}" if where else str(first["msg"])
