"""Errors a user can act on; each message names the problem."""

from __future__ import annotations


class AtomMemError(Exception):
    """Base of every expected, user-facing failure."""


class InvalidInput(AtomMemError):
    """Input that does not match a documented format."""


class UnknownSpace(AtomMemError):
    def __init__(self, tenant: str, space: str) -> None:
        super().__init__(f"space {space!r} does not exist for tenant {tenant!r}")
        self.tenant = tenant
        self.space = space


class SpaceExists(AtomMemError):
    pass


class SessionConflict(AtomMemError):
    """A session id that was committed before with different content."""
