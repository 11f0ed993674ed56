"""Accepting a session into a space: its record, and whether it still needs work."""

from __future__ import annotations

from common.context import MemoryContext
from common.errors import SessionConflict
from common.models.session import SessionInput, SessionRecord
from common.store import records


def session_hash(session: SessionInput) -> str:
    return session.content_hash()


def accept(
    ctx: MemoryContext, tenant: str, space: str, session: SessionInput, job_id: str | None = None
) -> tuple[SessionRecord, bool, bool]:
    """The session's record, whether it still needs work, and whether it is new (not stored
    yet). A session id already stored with other content is refused.

    A stored record is returned as read: it is never resumed or written here. This runs
    without the space's lock, and the lock's holder may be committing that very session: a
    record written back (or a plan applied) from this read could put the session a stage
    behind the holder's work, and the session would be committed or profiled again. A
    recorded plan is finished by the next drain, under the lock."""
    digest = session_hash(session)
    existing = records.get_session(ctx.store, tenant, space, session.session_id)
    if existing is not None:
        if existing.content_hash != digest:
            raise SessionConflict(
                f"session {session.session_id!r} is already in space {space!r} with different "
                "content; delete it before submitting a changed version"
            )
        return existing, existing.status != "done", False
    record = SessionRecord(
        tenant=tenant,
        space=space,
        session=session,
        seq=session.order,
        content_hash=digest,
        status="accepted",
        job_id=job_id,
    )
    return record, True, True


def note_participants(ctx: MemoryContext, tenant: str, space: str, session: SessionInput) -> None:
    """Remember the session's people on the space record (intent and metadata use them)."""
    space_record = records.require_space(ctx.store, tenant, space)
    new_people = [p for p in session.participants if p not in space_record.participants]
    if new_people:
        space_record.participants.extend(new_people)
        records.put_space(ctx.store, space_record)
