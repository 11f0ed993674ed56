"""Ingesting a session end to end in one process: extract, commit, profile batch."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from common.errors import SessionConflict
from common.memory.changes import CommitStats
from common.memory.commit import commit_facts, profile_batch, resume
from common.memory.context import MemoryContext
from common.memory.extract import draft_session
from common.models import ids
from common.models.session import SessionInput, SessionRecord
from common.store import records
from common.store.qdrant import Kind


@dataclass
class IngestOutcome:
    session_id: str
    status: Literal["committed", "unchanged"]
    stats: CommitStats


def session_hash(session: SessionInput) -> str:
    return ids.content_hash(session.model_dump(mode="json", exclude={"seq"}))


def accept(
    ctx: MemoryContext, tenant: str, space: str, session: SessionInput
) -> tuple[SessionRecord, bool]:
    """The session's record (existing or new) and whether it still needs work."""
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
    seq = session.seq
    if seq is None:
        seq = ctx.store.count(Kind.SESSIONS, tenant, space)
    record = SessionRecord(
        tenant=tenant,
        space=space,
        session=session,
        seq=seq,
        content_hash=digest,
        status="committing",
    )
    return record, True


def ingest_session(
    ctx: MemoryContext, tenant: str, space: str, session: SessionInput
) -> IngestOutcome:
    """Run every stage a session still needs; re-ingesting a finished session does nothing."""
    space_record = records.require_space(ctx.store, tenant, space)
    record, pending = accept(ctx, tenant, space, session)
    if not pending:
        return IngestOutcome(session.session_id, "unchanged", CommitStats())
    stats = CommitStats()
    if record.status == "committing":
        drafts = draft_session(ctx, tenant, space, session, space_record.participants)
        stats.add(commit_facts(ctx, record, drafts))
    stats.add(profile_batch(ctx, record))
    new_people = [p for p in session.participants if p not in space_record.participants]
    if new_people:
        space_record.participants.extend(new_people)
        records.put_space(ctx.store, space_record)
    return IngestOutcome(session.session_id, "committed", stats)
