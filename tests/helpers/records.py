"""Builders of what memory holds and what a drain step finds: facts, session records, drafts,
and a session at the head of its space's sequence."""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path

import numpy as np

from common.context import MemoryContext
from common.models import ids
from common.models.drafts import DraftFact
from common.models.jobs import Job
from common.models.memory import Fact, FactSource, FactTime, TimeRange
from common.models.session import SessionInput, SessionRecord, Turn
from common.store import records
from common.store.coordination.roles import Coordination


def stored_fact(
    fid: str,
    text: str,
    keywords: list[str] | None = None,
    participants: tuple[str, ...] = ("Priya",),
    turn: str = "s1:1",
    space: str = "s",
) -> Fact:
    """A fact as memory holds it, from one turn of one session on 8 May 2023."""
    return Fact(
        id=fid,
        tenant="t",
        space=space,
        text=text,
        participants=list(participants),
        keywords=keywords or [],
        time=FactTime(session=datetime(2023, 5, 8, 12, 0)),
        source=FactSource(session_id="s1", session_seq=0, turn_ids=[turn], positions=[1]),
    )


def turn_fact(
    i: int, keywords: list[str], people: list[str], seq: int, pos: int, text: str | None = None
) -> Fact:
    """Fact `f{i}` of session `s{seq}`, said at turn position `pos` on 1 January 2024: what
    the recall graph's channels read (keywords, people, turn position)."""
    return Fact(
        id=f"f{i}",
        tenant="t",
        space="s",
        text=text or f"fact {i}",
        participants=people,
        keywords=keywords,
        time=FactTime(session=datetime(2024, 1, 1)),
        source=FactSource(
            session_id=f"s{seq}", session_seq=seq, turn_ids=[f"D{seq}:{pos}"], positions=[pos]
        ),
    )


def session_record(session_id: str, seq: int, when: datetime, people: list[str]) -> SessionRecord:
    session = SessionInput(
        session_id=session_id,
        started_at=when,
        participants=people,
        turns=[Turn(id=f"{session_id}:0", speaker=people[0], text="placeholder text")],
    )
    return SessionRecord(
        tenant="t",
        space="s",
        session=session,
        seq=seq,
        content_hash=session_id,
        status="committing",
    )


def queued_head(ctx: MemoryContext, record: SessionRecord, journal: Path) -> Coordination:
    """`record` accepted (job j1, extracting) and at the head of its space's sequence, on a
    SQLite coordination journal at `journal`: what a drain step finds before it commits."""
    records.put_session(ctx.store, record.model_copy(update={"status": "accepted", "job_id": "j1"}))
    coord = Coordination.sqlite(journal)
    now = time.time()
    job = Job(
        job_id="j1", tenant="t", space="s", session_id=record.session.session_id,
        state="extracting", created_at=now, updated_at=now,
    )  # fmt: skip
    coord.jobs.put_job(job, "{}")
    coord.sequence.register("t", "s", record.session.session_id, 0)
    return coord


def draft(
    record: SessionRecord,
    text: str,
    vector: np.ndarray,
    keywords: list[str],
    people: list[str],
    index: int = 0,
    event_time: TimeRange | None = None,
    profile: bool = False,
) -> DraftFact:
    turn = f"{record.session.session_id}:{index}"
    return DraftFact(
        id=ids.fact_id("t", "s", record.session.session_id, turn, 0),
        text=text,
        turn_ids=[turn],
        positions=[index],
        participants=people,
        keywords=keywords,
        event_time=event_time,
        profile_worthy=profile,
        vector=vector.astype(float).tolist(),
    )
