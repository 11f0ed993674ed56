"""Errors a user can act on; each message names the problem."""

from __future__ import annotations


class AtomMemError(Exception):
    """Base of every expected, user-facing failure."""


class InvalidInput(AtomMemError):
    """Input that does not match a documented format."""


class NotFound(AtomMemError):
    """What was asked for does not exist (for this tenant)."""


class Conflict(AtomMemError):
    """The request clashes with the current state (exists already, still in progress)."""


class UnknownSpace(NotFound):
    def __init__(self, tenant: str, space: str) -> None:
        super().__init__(f"space {space!r} does not exist for tenant {tenant!r}")
        self.tenant = tenant
        self.space = space


class SpaceExists(Conflict):
    pass


class SessionConflict(Conflict):
    """A session id that was committed before with different content."""


def error_kind(exc: AtomMemError) -> str:
    """The class of a failure as it crosses the wire: not_found, conflict, invalid, error."""
    if isinstance(exc, NotFound):
        return "not_found"
    if isinstance(exc, Conflict):
        return "conflict"
    if isinstance(exc, InvalidInput):
        return "invalid"
    return "error"


def failure(exc: AtomMemError) -> dict[str, str]:
    """A failure as a task's reply: {"error": message, "kind": error_kind}."""
    return {"error": str(exc), "kind": error_kind(exc)}
