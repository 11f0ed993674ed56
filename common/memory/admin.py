"""Reads of stored memory and writes outside ingest (create a space, erase), as the worker
runs them for the API: the API never opens the store itself."""

from __future__ import annotations

from typing import Any, TypeVar

from common import rebuild
from common.errors import Conflict, NotFound
from common.memory.commit import resume
from common.memory.context import MemoryContext
from common.memory.erase import ErasureReport, erase_facts, erase_session, erase_space
from common.memory.stages import cancel_session
from common.models import ids
from common.models.jobs import AdminPayload, ReadPayload
from common.models.memory import Event, Fact, Profile
from common.models.responses import SessionSummary, StoredSession
from common.store import records
from common.store.coordination import ChunkParking, Coordination, JobStore
from common.store.space_index import KindIndex

Record = TypeVar("Record", Fact, Event, Profile)


def read(ctx: MemoryContext, p: ReadPayload) -> dict[str, Any]:
    """Spaces, or a space's facts, events or profiles (a page, or one with its history)."""
    if p.what == "spaces":
        spaces = records.list_spaces(ctx.store, p.tenant)
        return {"items": [_space(ctx, p.tenant, s.space) for s in spaces]}
    assert p.space is not None
    records.require_space(ctx.store, p.tenant, p.space)
    if p.what == "space":
        return _space(ctx, p.tenant, p.space)
    if p.what in ("session", "sessions"):
        return _sessions(ctx, p)
    index = ctx.index(p.tenant, p.space)
    if p.what in ("fact", "facts"):
        return _records(index.facts, p, "fact")
    if p.what in ("event", "events"):
        return _records(index.events, p, "event")
    return _records(index.profiles, p, "profile")


def _records(items: KindIndex[Record], p: ReadPayload, single: str) -> dict[str, Any]:
    """One record by id (`p.what` is `single`), or a page of them."""
    if p.what == single:
        if p.item_id is None or p.item_id not in items:
            raise NotFound(f"no {single} {p.item_id!r} in space {p.space!r}")
        return items.get(p.item_id).model_dump(mode="json")
    everything = sorted(items.items(), key=_order)
    page = everything[p.offset : p.offset + p.limit]
    return {
        "total": len(everything),
        "offset": p.offset,
        "items": [r.model_dump(mode="json") for r in page],
    }


def _sessions(ctx: MemoryContext, p: ReadPayload) -> dict[str, Any]:
    """One stored session with its turns, or a page of them in session order."""
    assert p.space is not None
    if p.what == "session":
        found = None
        if p.item_id is not None:
            found = records.get_session(ctx.store, p.tenant, p.space, p.item_id)
        if found is None:
            raise NotFound(f"no session {p.item_id!r} in space {p.space!r}")
        return StoredSession.of(found).model_dump(mode="json")
    stored = sorted(
        records.list_sessions(ctx.store, p.tenant, p.space),
        key=lambda r: (r.seq, r.session.session_id),
    )
    page = stored[p.offset : p.offset + p.limit]
    return {
        "total": len(stored),
        "offset": p.offset,
        "items": [SessionSummary.of(r).model_dump(mode="json") for r in page],
    }


def _order(record: Fact | Event | Profile) -> tuple[int, list[int], str] | str:
    """Facts in session order, events and profiles by id."""
    if isinstance(record, Fact):
        return (record.source.session_seq, record.source.positions, record.id)
    return record.id


def _space(ctx: MemoryContext, tenant: str, space: str) -> dict[str, Any]:
    record = records.require_space(ctx.store, tenant, space)
    counts = records.space_counts(ctx.store, tenant, space)
    return {
        "name": record.space,
        "created_at": record.created_at.isoformat(),
        "participants": record.participants,
        "counts": counts,
    }


def administer(ctx: MemoryContext, coord: Coordination, p: AdminPayload) -> dict[str, Any]:
    """Run one admin write; the caller holds the space's lock."""
    if p.op == "create_space":
        return _space(ctx, p.tenant, records.create_space(ctx.store, p.tenant, p.space).space)
    if p.op == "rebuild_from":  # the worker submits these sessions once the lock is released
        assert p.item_id is not None
        sessions = rebuild.plan(ctx.store, p.tenant, source=p.item_id, into=p.space)
        return {"sessions": [s.model_dump(mode="json") for s in sessions]}
    records.require_space(ctx.store, p.tenant, p.space)
    # A stage interrupted after recording its plan is finished first: applied after the
    # erasure, its plan would write back what the erasure removed.
    for stored in records.list_sessions(ctx.store, p.tenant, p.space):
        if stored.plan is not None:
            resume(ctx, stored)
    report = ErasureReport()
    in_flight = coord.sequence.pending(p.tenant, p.space)
    if p.op == "erase_fact":
        assert p.item_id is not None
        if p.item_id not in ctx.index(p.tenant, p.space).facts:
            raise NotFound(f"no fact {p.item_id!r} in space {p.space!r}")
        erase_facts(ctx, p.tenant, p.space, {p.item_id}, report)
    elif p.op == "erase_session":
        assert p.item_id is not None
        if p.item_id in in_flight:
            if _writing(ctx, p.tenant, p.space, [p.item_id]):
                raise Conflict(
                    f"session {p.item_id!r} is being committed to memory (job "
                    f"{ids.job_id(p.tenant, p.space, p.item_id)}); erase it once the job finishes"
                )
            _cancel(ctx, coord, p.tenant, p.space, p.item_id, report)
            return {"erased": report.as_dict()}
        if records.get_session(ctx.store, p.tenant, p.space, p.item_id) is not None:
            erase_session(ctx, p.tenant, p.space, p.item_id, report)
        elif _job_leftovers(coord, p.tenant, p.space, p.item_id):
            report.sessions_deleted.append(p.item_id)  # failed before its record was stored
        else:
            raise NotFound(f"no session {p.item_id!r} in space {p.space!r}")
        _forget_jobs(coord.jobs, coord.chunks, p.tenant, p.space, [p.item_id])
    else:
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
        _forget_jobs(
            coord.jobs,
            coord.chunks,
            p.tenant,
            p.space,
            [s for s in report.sessions_deleted if s not in cancelled],
        )
        coord.sequence.forget(p.tenant, p.space)
        coord.versions.forget(p.tenant, p.space)
    return {"erased": report.as_dict()}


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
    report: ErasureReport,
) -> None:
    """A session accepted but with no memory written yet: its job fails as erased and its
    queue state, drafts and stored record go (the caller holds the space's lock, so no drain
    commits it meanwhile)."""
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
