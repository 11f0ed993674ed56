"""Rebuilding a space: its stored sessions, in session order, sent again as ordinary jobs into
a new space, so that the current configuration builds a second memory beside the first.

The new space must be empty, or hold only sessions of the same rebuild (the same sessions of
the source with the same content): job ids derive from the space and the session, so
running the same rebuild again is the same jobs, and resumes it."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel

from common.errors import Conflict, InvalidInput
from common.models.session import SessionInput
from common.store import records
from common.store.base import Store


def check_spaces(source: str, into: str) -> None:
    if source == into:
        raise InvalidInput(f"rebuild {source!r} into another space, not into itself")


def check_target(
    source: str,
    into: str,
    sessions: Sequence[SessionInput],
    counts: dict[str, int],
    held: Sequence[SessionInput],
) -> None:
    """Refuse a target that holds memory other than this rebuild's: it must be empty
    (`counts` all 0), or every session it `held` must be one of the source's `sessions`
    with the same content (an interrupted run of the same rebuild)."""
    if not any(counts.values()):
        return
    if not held:
        raise Conflict(
            f"space {into!r} is not empty ({_counted(counts)}) and holds no session of "
            f"{source!r}: rebuild into a new or empty space"
        )
    ours = {s.session_id: s.content_hash() for s in sessions}
    for session in held:
        if ours.get(session.session_id) != session.content_hash():
            raise Conflict(
                f"space {into!r} holds session {session.session_id!r}, which is not the same "
                f"session of {source!r}: it is no rebuild of {source!r}; rebuild into a new "
                "or empty space"
            )


def _counted(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {kind}" for kind, n in counts.items() if n)


class Plan(BaseModel):
    """A rebuild's sessions, in session order, as the admin task hands them to the producer."""

    sessions: list[SessionInput]


def plan(store: Store, tenant: str, source: str, into: str) -> list[SessionInput]:
    """The source's stored sessions in session order, once the target is checked (created
    when missing): what the rebuild submits. The caller holds the target's lock (a worker's
    admin op) or owns the store (an embedded run), so no other write slips in between."""
    check_spaces(source, into)
    records.require_space(store, tenant, source)
    stored = records.list_sessions(store, tenant, source)
    sessions = [r.session for r in sorted(stored, key=lambda r: (r.seq, r.session.session_id))]
    # counted by scope, not by the space record: an interrupted copy leaves points without one
    counts = records.space_counts(store, tenant, into)
    held = [r.session for r in records.list_sessions(store, tenant, into)]
    check_target(source, into, sessions, counts, held)
    records.create_space(store, tenant, into, exist_ok=True)
    return sessions
