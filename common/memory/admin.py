"""Writes outside ingest, as the admin task runs them under the space's lock: create a space,
plan a rebuild into it, erase a fact, a session's contribution or the whole space, correct a
fact. The API never opens the store itself."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from pydantic import BaseModel

from common.context import MemoryContext
from common.errors import Conflict, InvalidInput, NotFound
from common.memory import rebuild
from common.memory.commit import resume
from common.memory.correct import correct_fact
from common.memory.erase import erase_facts, erase_session, erase_space
from common.memory.listings import space
from common.memory.stages import cancel_session
from common.models import ids
from common.models.jobs import AdminOp, AdminPayload
from common.models.responses import CorrectionReceipt, Erased, ErasureReceipt, Space
from common.store import records
from common.store.coordination.chunks import ChunkParking
from common.store.coordination.jobs import JobStore
from common.store.coordination.roles import Coordination

Operation = Callable[[MemoryContext, Coordination, AdminPayload], BaseModel]


def administer(ctx: MemoryContext, coord: Coordination, p: AdminPayload) -> BaseModel:
    """Run one admin write; the caller holds the space's lock."""
    return OPERATIONS[p.op](ctx, coord, p)


def _create_space(ctx: MemoryContext, coord: Coordination, p: AdminPayload) -> Space:
    return space(ctx, p.tenant, records.create_space(ctx.store, p.tenant, p.space).space)


def _plan_rebuild(ctx: MemoryContext, coord: Coordination, p: AdminPayload) -> rebuild.Plan:
    """The source's sessions, checked against the target; the worker submits them once the
    lock is released."""
    source = _target(p)
    return rebuild.Plan(sessions=rebuild.plan(ctx.store, p.tenant, source=source, into=p.space))


def _erase_fact(ctx: MemoryContext, coord: Coordination, p: AdminPayload) -> ErasureReceipt:
    fact_id = _target(p)
    report = _erasing(ctx, p)
    if fact_id not in ctx.index(p.tenant, p.space).facts:
        raise NotFound(f"no fact {fact_id!r} in space {p.space!r}")
    erase_facts(ctx, p.tenant, p.space, {fact_id}, report)
    return ErasureReceipt(erased=report)


def _correct_fact(ctx: MemoryContext, coord: Coordination, p: AdminPayload) -> CorrectionReceipt:
    """The fact's text as `p.correction` says; the correction's time is when it was sent
    (the payload's `enqueued_at`), the same in every run of the task."""
    fact_id = _target(p)
    if p.correction is None:
        raise InvalidInput("correct_fact says what the fact should read (correction)")
    _finish_stages(ctx, p)
    at = datetime.fromtimestamp(p.enqueued_at, UTC).replace(tzinfo=None)
    return correct_fact(ctx, p.tenant, p.space, fact_id, p.correction, at)


def _erase_session(ctx: MemoryContext, coord: Coordination, p: AdminPayload) -> ErasureReceipt:
    """A session in flight is cancelled (unless its memory is being written); a stored one
    leaves memory with what only it supports; its job and parked drafts go either way."""
    session_id = _target(p)
    report = _erasing(ctx, p)
    if session_id in coord.sequence.pending(p.tenant, p.space):
        if _writing(ctx, p.tenant, p.space, [session_id]):
            raise Conflict(
                f"session {session_id!r} is being committed to memory (job "
                f"{ids.job_id(p.tenant, p.space, session_id)}); erase it once the job finishes"
            )
        _cancel(ctx, coord, p.tenant, p.space, session_id, report)
        return ErasureReceipt(erased=report)
    if records.get_session(ctx.store, p.tenant, p.space, session_id) is not None:
        erase_session(ctx, p.tenant, p.space, session_id, report)
    elif _job_leftovers(coord, p.tenant, p.space, session_id):
        report.sessions_deleted.append(session_id)  # failed before its record was stored
    else:
        raise NotFound(f"no session {session_id!r} in space {p.space!r}")
    _forget_jobs(coord.jobs, coord.chunks, p.tenant, p.space, [session_id])
    return ErasureReceipt(erased=report)


def _erase_space(ctx: MemoryContext, coord: Coordination, p: AdminPayload) -> ErasureReceipt:
    """Sessions in flight are cancelled, then the space and its queue state go."""
    report = _erasing(ctx, p)
    in_flight = coord.sequence.pending(p.tenant, p.space)
    writing = _writing(ctx, p.tenant, p.space, in_flight)
    if writing:
        raise Conflict(
            f"space {p.space!r} has {len(writing)} sessions being committed to memory "
            f"({', '.join(repr(s) for s in writing[:5])}); erase it once their jobs finish"
        )
    for session_id in in_flight:
        _cancel(ctx, coord, p.tenant, p.space, session_id, report)
    erase_space(ctx, p.tenant, p.space, report)
    cancelled = set(in_flight)
    stored = [s for s in report.sessions_deleted if s not in cancelled]
    _forget_jobs(coord.jobs, coord.chunks, p.tenant, p.space, stored)
    coord.sequence.forget(p.tenant, p.space)
    coord.versions.forget(p.tenant, p.space)
    return ErasureReceipt(erased=report)


OPERATIONS: dict[AdminOp, Operation] = {
    "create_space": _create_space,
    "rebuild_from": _plan_rebuild,
    "erase_fact": _erase_fact,
    "erase_session": _erase_session,
    "erase_space": _erase_space,
    "correct_fact": _correct_fact,
}


def _target(p: AdminPayload) -> str:
    """The fact or session an operation acts on (a rebuild's source)."""
    if p.item_id is None:
        raise InvalidInput(f"{p.op} names what it acts on (item_id)")
    return p.item_id


def _erasing(ctx: MemoryContext, p: AdminPayload) -> Erased:
    """An empty report for an erasure in an existing space (`_finish_stages`)."""
    _finish_stages(ctx, p)
    return Erased()


def _finish_stages(ctx: MemoryContext, p: AdminPayload) -> None:
    """Before an erasure or a correction in an existing space, a stage interrupted after
    recording its plan is finished: applied later, its plan would write back what was
    erased or corrected."""
    records.require_space(ctx.store, p.tenant, p.space)
    for stored in records.list_sessions(ctx.store, p.tenant, p.space):
        if stored.plan is not None:
            resume(ctx, stored)


def _writing(ctx: MemoryContext, tenant: str, space: str, in_flight: list[str]) -> list[str]:
    """The sessions in flight whose memory is being written (committed, being profiled): an
    erasure waits for their jobs. Those with no memory yet (no record, or `accepted`) can be
    cancelled."""
    writing = []
    for session_id in in_flight:
        stored = records.get_session(ctx.store, tenant, space, session_id)
        if stored is not None and stored.status != "accepted":
            writing.append(session_id)
    return writing


def _cancel(
    ctx: MemoryContext,
    coord: Coordination,
    tenant: str,
    space: str,
    session_id: str,
    report: Erased,
) -> None:
    """A session accepted but with no memory written yet: its job fails as erased and its
    queue state, drafts and stored record go (the caller holds the space's lock, so no drain
    commits it meanwhile). The record goes first: a store that refuses leaves the job as it
    was, in flight, for the erasure's retry. It goes again after: an accept still running may
    have stored it in between, and checked the job before it was cancelled (`accept_stage`
    drops a record it stored only once it sees the job gone)."""
    records.delete_session(ctx.store, tenant, space, session_id)
    cancel_session(coord, tenant, space, session_id)
    records.delete_session(ctx.store, tenant, space, session_id)
    report.sessions_deleted.append(session_id)


def _job_leftovers(coord: Coordination, tenant: str, space: str, session_id: str) -> bool:
    """Whether a session's job still holds its raw turns (payload) or drafts (parked chunks)."""
    job_id = ids.job_id(tenant, space, session_id)
    return coord.jobs.job_payload(tenant, job_id) is not None or bool(
        coord.chunks.parked(tenant, space, session_id)
    )


def _forget_jobs(
    jobs: JobStore, chunks: ChunkParking, tenant: str, space: str, session_ids: list[str]
) -> None:
    """Jobs hold the raw session they carried: erasure takes them too."""
    for session_id in session_ids:
        chunks.drop_chunks(tenant, space, session_id)
        jobs.delete_job(tenant, ids.job_id(tenant, space, session_id))
