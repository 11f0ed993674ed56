"""Accepting a session into a space, and running all its stages in-line (no queues)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from common.errors import SessionConflict
from common.llm import usage
from common.memory.changes import CommitStats
from common.memory.commit import commit_facts, profile_batch, resume
from common.memory.context import MemoryContext
from common.memory.extract import draft_in_chunks
from common.models import ids
from common.models.session import SessionInput, SessionRecord
from common.store import records


@dataclass
class IngestOutcome:
    session_id: str
    status: Literal["committed", "unchanged"]
    stats: CommitStats


def session_hash(session: SessionInput) -> str:
    return ids.content_hash(session.model_dump(mode="json", exclude={"seq"}))


def accept(
    ctx: MemoryContext, tenant: str, space: str, session: SessionInput, job_id: str | None = None
) -> tuple[SessionRecord, bool]:
    """The session's record (existing, resumed, or new and not yet stored) and whether it
    still needs work. A session id already stored with other content is refused."""
    digest = session_hash(session)
    existing = records.get_session(ctx.store, tenant, space, session.session_id)
    if existing is not None:
        if existing.content_hash != digest:
            raise SessionConflict(
                f"session {session.session_id!r} is already in space {space!r} with different "
                "content; delete it before submitting a changed version"
            )
        existing = resume(ctx, existing)
        return existing, existing.status != "done"
    record = SessionRecord(
        tenant=tenant,
        space=space,
        session=session,
        seq=session.order,
        content_hash=digest,
        status="accepted",
        job_id=job_id,
    )
    return record, True


def ingest_session(
    ctx: MemoryContext, tenant: str, space: str, session: SessionInput
) -> IngestOutcome:
    """Run every stage a session still needs; re-ingesting a finished session does nothing."""
    records.require_space(ctx.store, tenant, space)
    record, pending = accept(ctx, tenant, space, session)
    if not pending:
        return IngestOutcome(session.session_id, "unchanged", CommitStats())
    stats = CommitStats()
    if record.status in ("accepted", "committing"):
        with usage.metered() as extraction:
            drafts = draft_in_chunks(ctx, tenant, space, session)
        stats.add(commit_facts(ctx, record, drafts, extraction.as_counts()))
    stats.add(profile_batch(ctx, record))
    note_participants(ctx, tenant, space, session)
    return IngestOutcome(session.session_id, "committed", stats)


def note_participants(ctx: MemoryContext, tenant: str, space: str, session: SessionInput) -> None:
    """Remember the session's people on the space record (intent and metadata use them)."""
    space_record = records.require_space(ctx.store, tenant, space)
    new_people = [p for p in session.participants if p not in space_record.participants]
    if new_people:
        space_record.participants.extend(new_people)
        records.put_space(ctx.store, space_record)
