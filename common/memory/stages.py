"""The stages of the queued ingest, one function per task, sequenced per space.

A space commits strictly in session order: sessions are registered in a per-space
sequence when submitted; the head of the sequence is committed, then profiled, then
removed, each step under the space's lock. A step that cannot run now (head not extracted
yet) returns and lets the next finished step pick the work up; every step ends by asking
for another drain, and a step that finds the lock held asks for one a little later (in
case the holder died), so nothing waits in a blocked worker slot.
"""

from __future__ import annotations

import json
import math
from enum import StrEnum

from common.context import MemoryContext
from common.errors import AtomMemError
from common.llm import usage
from common.llm.budget import WAITING, BudgetShort, ModelUnavailable
from common.llm.model_backend import KeptCalls, keeping
from common.memory.commit import (
    commit_facts,
    profile_batch,
    profile_flush,
    resume,
    settle_lagging,
)
from common.memory.extract import chunks, draft_session
from common.memory.ingest import accept, note_participants, session_hash
from common.models import ids
from common.models.drafts import DraftFact
from common.models.jobs import FINISHED, AcceptPayload, ExtractPayload, Job
from common.models.session import SessionInput
from common.store import records
from common.store.base import StoreUnavailable
from common.store.coordination.chunks import ChunkParking
from common.store.coordination.liveness import JOB_LIVENESS
from common.store.coordination.locks import LockLost, space_lock
from common.store.coordination.roles import Coordination

WORKING = ("extracting", "committing", "profiling")
ERASED = "erased while being ingested"


class Next(StrEnum):
    """What the caller should send after a drain or profile step."""

    NOTHING = "nothing"
    PROFILE = "profile"
    DRAIN = "drain"
    BUSY = "busy"  # the lock is held: try again shortly, in case its holder died


def fail_job(
    coord: Coordination, tenant: str, space: str, session_id: str, job_id: str, reason: str
) -> None:
    """A permanent failure: the job says why and what its model calls cost so far, and the
    space's sequence moves on. What was parked stays (until it expires or is erased), so
    the job sent again resumes rather than pays for its calls twice."""
    spent = parked_spend(coord.chunks, tenant, space, session_id)
    if spent:
        coord.jobs.update_job(tenant, job_id, state="failed", reason=reason, counts=spent)
    else:
        coord.jobs.update_job(tenant, job_id, state="failed", reason=reason)
    _leave_sequence(coord, tenant, space, session_id, keep_parked=True)


def wait_for_budget(coord: Coordination, tenant: str, job_id: str, reason: str = WAITING) -> None:
    """The job's step went back to its queue to wait for the model budget (or for its
    endpoint to come back): the job says so, in its state of the moment (waiting is never a
    failure), and counts as progressing."""
    job = coord.jobs.get_job(tenant, job_id)
    if job is not None and job.state not in FINISHED:
        coord.jobs.update_job(tenant, job_id, reason=reason)


def waiting(short: BudgetShort, outage_s: float) -> str:
    """What a job re-queued for its model says: waiting for its budget (and that the budget
    is zero, which no wait ends), or for its failing endpoint, and for how long at most."""
    if isinstance(short, ModelUnavailable):
        return f"{short}; retried until it has failed for {outage_s:g} s (llm.outage_s)"
    if math.isinf(short.retry_in):
        return f"{WAITING}: {short.endpoint} allows no call (a zero rpm, tpm or max_concurrent)"
    return WAITING


def _leave_sequence(
    coord: Coordination, tenant: str, space: str, session_id: str, keep_parked: bool = False
) -> None:
    """The session leaves its space's sequence and its parked chunks go (unless kept)."""
    coord.sequence.unregister(tenant, space, session_id)
    if not keep_parked:
        coord.chunks.drop_chunks(tenant, space, session_id)


def parked_spend(chunks: ChunkParking, tenant: str, space: str, session_id: str) -> dict[str, int]:
    """What the session's parked extraction cost: every parked chunk's counts, and the
    parked calls of chunks not parked yet."""
    present = chunks.get_chunks(tenant, space, session_id)
    cost = usage.Usage()
    for raw in present.values():
        cost.merge(usage.Usage.from_counts(json.loads(raw).get("usage", {})))
    for (chunk, _), raw in chunks.get_calls(tenant, space, session_id).items():
        if chunk not in present:
            call = json.loads(raw)
            cost.record(call["stage"], call["prompt_tokens"], call["completion_tokens"])
    return cost.as_counts()


def cancel_session(coord: Coordination, tenant: str, space: str, session_id: str) -> None:
    """Erase a session that has written no memory yet (the caller holds the space's lock and
    deletes its stored record): its job fails as erased and loses its payload, then the
    session leaves the sequence and its parked drafts go. In that order: a task of the job
    still running checks the job after its own write (`accept_stage`, `abandoned`), so
    whatever it writes after the job changed is dropped by the task, and whatever it wrote
    before by this."""
    coord.jobs.cancel_job(tenant, ids.job_id(tenant, space, session_id), ERASED)
    _leave_sequence(coord, tenant, space, session_id)


def abandoned(coord: Coordination, payload: ExtractPayload) -> bool:
    """Checked after extracting a chunk, however that ended: whether its job was erased or
    failed meanwhile; then nothing asks for a drain. An erased job's parked drafts and calls
    go (an erasure's own drop may have run before this chunk parked them); a failed job's
    stay for its retry."""
    job = coord.jobs.get_job(payload.tenant, payload.job_id)
    return drop_if_erased(coord, payload, job) or (job is not None and job.state == "failed")


def drop_if_erased(coord: Coordination, payload: ExtractPayload, job: Job | None) -> bool:
    """Whether the chunk's job (`job`, as just read) was erased, its payload gone; then the
    session's parked drafts and calls go."""
    gone = job is None or coord.jobs.job_payload(payload.tenant, payload.job_id) is None
    if gone:
        coord.chunks.drop_chunks(payload.tenant, payload.space, payload.session.session_id)
    return gone


def accept_stage(
    ctx: MemoryContext, coord: Coordination, payload: AcceptPayload
) -> list[ExtractPayload] | None:
    """Store the raw session; return the chunks still to extract (a redelivered accept skips
    those already parked), or None when the session needs nothing more."""
    session_id = payload.session.session_id
    stored = coord.jobs.job_payload(payload.tenant, payload.job_id)
    if stored is None:
        # Erased while being ingested (or expired): nothing to accept. A sweep that read the
        # payload just before the erasure may have put the session back in the sequence, and
        # an earlier delivery of this task, killed after storing the record, left it.
        coord.sequence.unregister(payload.tenant, payload.space, session_id)
        _drop_record(ctx, payload, session_hash(payload.session))
        return None
    if not _same_session(stored, payload):
        return None  # not the payload the job was accepted with: it must never replace it
    records.require_space(ctx.store, payload.tenant, payload.space)
    record, pending, new = accept(
        ctx, payload.tenant, payload.space, payload.session, payload.job_id
    )
    if not pending:
        coord.sequence.unregister(payload.tenant, payload.space, payload.session.session_id)
        job = coord.jobs.get_job(payload.tenant, payload.job_id)
        if job is not None and job.state in WORKING:  # it did the work, then lost track
            coord.jobs.update_job(payload.tenant, payload.job_id, state="done", counts=record.stats)
        elif job is None or job.state == "queued":  # a new job for a session in memory
            coord.jobs.update_job(
                payload.tenant, payload.job_id, state="done", counts={}, unchanged=True
            )
        return None
    if new:
        records.put_session(ctx.store, record)
    elif record.status != "accepted":  # a recorded plan comes with committing or profiling
        coord.jobs.update_job(payload.tenant, payload.job_id, state="committing")
        return []  # extraction already committed; the drain takes it from here
    again = coord.jobs.job_payload(payload.tenant, payload.job_id)
    if again is None or not _same_session(again, payload):
        # Erased while this ran (checked after the record's write, so one of the two removes
        # it), and maybe submitted again since with other content: what it stored goes, and
        # the new job is left alone.
        _drop_record(ctx, payload, record.content_hash)
        return None
    job = coord.jobs.update_job(payload.tenant, payload.job_id, state="extracting")
    if job is None or job.state in FINISHED:
        return None  # a stale read: the lock's holder finished the session meanwhile
    parked = coord.chunks.parked(payload.tenant, payload.space, payload.session.session_id)
    now = records.get_session(ctx.store, payload.tenant, payload.space, session_id)
    if now is None or now.status != "accepted":
        # Committed (or erased) since the record was read: the drain takes it from here. Read
        # after the parked chunks, which go only after the record moved on, so a session
        # still accepted here had its parked chunks read whole.
        return []
    todo = extract_payloads(ctx, payload.job_id, payload.tenant, payload.space, payload.session)
    return [p for p in todo if p.chunk not in parked]  # none left: the drain takes it over


def _drop_record(ctx: MemoryContext, payload: AcceptPayload, content_hash: str) -> None:
    """Delete the session's stored record if it is the one this job stored for this content
    and no memory was written from it yet; any other record is left as it is."""
    session_id = payload.session.session_id
    found = records.get_session(ctx.store, payload.tenant, payload.space, session_id)
    if (
        found is not None
        and found.status == "accepted"
        and found.plan is None
        and found.job_id == payload.job_id
        and found.content_hash == content_hash
    ):
        records.delete_session(ctx.store, payload.tenant, payload.space, session_id)


def erased(coord: Coordination, tenant: str, job_id: str) -> bool:
    """Whether the job was erased while being ingested: failed, and without its payload
    (`cancel_session` writes both at once; the mark every later reader checks)."""
    job = coord.jobs.get_job(tenant, job_id)
    return (
        job is not None and job.state == "failed" and coord.jobs.job_payload(tenant, job_id) is None
    )


def _same_session(stored: str, payload: AcceptPayload) -> bool:
    try:
        first = AcceptPayload.model_validate_json(stored).session
    except ValueError:
        return True  # nothing readable to protect
    return session_hash(first) == session_hash(payload.session)


def extract_payloads(
    ctx: MemoryContext, job_id: str, tenant: str, space: str, session: SessionInput
) -> list[ExtractPayload]:
    """One extract task per chunk of turns, numbered so the drain can tell when it has all."""
    size = ctx.settings.pipeline.extract_batch_turns
    cut = chunks(session, size, ctx.settings.memory.context_window_k)
    return [
        ExtractPayload(
            enqueued_at=0.0,
            job_id=job_id,
            tenant=tenant,
            space=space,
            session=chunk,
            context_turns=skip,
            chunk=i,
            chunks=len(cut),
            session_hash=session_hash(session),
        )
        for i, (chunk, skip) in enumerate(cut)
    ]


def extract_stage(ctx: MemoryContext, chunks: ChunkParking, payload: ExtractPayload) -> bool:
    """Draft the facts of one chunk and park them; True once every chunk of the session is
    parked. Parking is idempotent, so a redelivered chunk counts once: the fan-in survives a
    worker killed at any point (a counter would not). Each model call is parked as it
    succeeds, so a run re-queued (budget, outage) or failed replays the calls it made."""
    session_id = payload.session.session_id
    found = chunks.get_calls(payload.tenant, payload.space, session_id, payload.chunk)

    def park(digest: str, answer: str) -> None:  # nothing once the job is erased
        chunks.put_call(
            payload.tenant,
            payload.space,
            session_id,
            payload.chunk,
            digest,
            answer,
            job_id=payload.job_id,
        )

    kept = KeptCalls(found={digest: raw for (_, digest), raw in found.items()}, park=park)
    with (
        JOB_LIVENESS.working_on(payload.tenant, payload.job_id),
        usage.metered() as used,
        keeping(kept),
    ):
        drafts = draft_session(
            ctx, payload.tenant, payload.space, payload.session, payload.context_turns
        )
    body = {
        "drafts": [d.model_dump(mode="json") for d in drafts],
        "usage": used.as_counts(),
        "session_hash": payload.session_hash,
    }
    parked = chunks.put_chunk(
        payload.tenant,
        payload.space,
        payload.session.session_id,
        payload.chunk,
        payload.chunks,
        json.dumps(body),
    )
    return parked >= payload.chunks


def parked_drafts(
    chunks: ChunkParking,
    tenant: str,
    space: str,
    session_id: str,
    content_hash: str | None = None,
) -> tuple[list[DraftFact], dict[str, int]] | None:
    """The session's drafts in chunk order and what extracting them cost, or None while a
    chunk is still being extracted.

    A chunk drafted from other content than `content_hash` (a late task of an erased job,
    parked after the session was submitted again with other content) is dropped and counts
    as not extracted: the job's next resend extracts it again."""
    present = chunks.parked(tenant, space, session_id)  # names only: cheap while incomplete
    if not _complete(present):
        return None
    total = max(present.values())
    parked = {i: json.loads(raw) for i, raw in chunks.get_chunks(tenant, space, session_id).items()}
    stale = [
        i
        for i, body in parked.items()
        if content_hash is not None and (body.get("session_hash") or content_hash) != content_hash
    ]
    for i in stale:
        chunks.drop_chunk(tenant, space, session_id, i)
    if stale:
        return None
    cost = usage.Usage()
    for i in range(total):
        cost.merge(usage.Usage.from_counts(parked[i].get("usage", {})))
    drafts = [DraftFact.model_validate(d) for i in range(total) for d in parked[i]["drafts"]]
    return drafts, cost.as_counts()


def _complete(present: dict[int, int]) -> bool:
    """Whether every chunk of a session is parked (`ChunkParking.parked`: chunk -> total)."""
    total = max(present.values(), default=0)
    return bool(present) and all(i in present for i in range(total))


def _next_ready(coord: Coordination, tenant: str, space: str) -> bool:
    """Whether the session after the head is extracted, ready to commit right after it."""
    first = coord.sequence.first(tenant, space, 2)
    return len(first) == 2


def drain_stage(ctx: MemoryContext, coord: Coordination, tenant: str, space: str) -> Next:
    """Commit the head session of the space if its drafts are ready."""
    with space_lock(coord.locks, tenant, space, ctx.settings.broker.lock_ttl_ms) as lock:
        if lock is None:
            return Next.BUSY
        head = coord.sequence.head(tenant, space)
        if head is None:
            settle_lagging(ctx, tenant, space)
            return Next.NOTHING
        record = records.get_session(ctx.store, tenant, space, head)
        if record is None:
            return Next.NOTHING  # not accepted yet
        record = resume(ctx, record)
        job_id = record.job_id or ""
        if record.status == "accepted" and erased(coord, tenant, job_id):
            # An erasure cancelled it and was interrupted before it finished: finish it here
            # rather than commit what it erased.
            records.delete_session(ctx.store, tenant, space, head)
            _leave_sequence(coord, tenant, space, head)
            return Next.DRAIN
        if record.status == "done":
            ctx.durable(tenant, space)  # `resume` may have just written it
            _leave_sequence(coord, tenant, space, head)
            job = coord.jobs.get_job(tenant, job_id)
            # Only a job that did this work (interrupted after it) is finished here with the
            # session's counts. A resubmitted job is still queued: its accept reports it
            # unchanged, and marking it here would let a waiter see stale counts.
            if job is not None and job.state in WORKING:
                coord.jobs.update_job(tenant, job_id, state="done", counts=record.stats)
            return Next.DRAIN
        if record.status == "committed":
            return Next.PROFILE
        parked = parked_drafts(coord.chunks, tenant, space, head, record.content_hash)
        if parked is None:
            return Next.NOTHING  # still extracting: its last chunk asks for a drain
        drafts, extraction = parked
        coord.jobs.update_job(tenant, job_id, state="committing", reason=None)
        try:
            commit_facts(
                ctx, record, drafts, extraction, lock.check, _next_ready(coord, tenant, space)
            )
        except LockLost:
            return Next.BUSY  # the lock's new holder commits it
        except BudgetShort as short:
            wait_for_budget(coord, tenant, job_id, waiting(short, ctx.settings.llm.outage_s))
            raise  # the task comes back to this drain in a while (workers.tasks.policy)
        except AtomMemError as exc:
            fail_job(coord, tenant, space, head, job_id, str(exc))
            return Next.DRAIN
        note_participants(ctx, tenant, space, record.session)
        coord.jobs.update_job(tenant, job_id, state="profiling", counts=record.stats, reason=None)
        return Next.PROFILE


def profile_stage(
    ctx: MemoryContext, coord: Coordination, tenant: str, space: str, session_id: str | None
) -> Next:
    """The profile batch after a session's commit (or on demand with no session)."""
    with space_lock(coord.locks, tenant, space, ctx.settings.broker.lock_ttl_ms) as lock:
        if lock is None:
            return Next.BUSY
        if session_id is None:
            profile_flush(ctx, tenant, space)
            return Next.NOTHING
        if coord.sequence.head(tenant, space) != session_id:
            return Next.NOTHING  # a duplicate of a batch that already ran
        record = records.get_session(ctx.store, tenant, space, session_id)
        if record is None:
            return Next.NOTHING
        record = resume(ctx, record)
        if record.status not in ("committed", "done"):
            # The head moved on since its drain returned (an erasure, a failure) to a session
            # not committed yet: its own drain commits it.
            return Next.DRAIN
        if record.status == "committed":
            try:
                profile_batch(ctx, record, lock.check)
            except LockLost:
                return Next.BUSY
            except BudgetShort as short:
                why = waiting(short, ctx.settings.llm.outage_s)
                wait_for_budget(coord, tenant, record.job_id or "", why)
                raise
            except AtomMemError as exc:  # e.g. the model failed for good: nothing applied
                reason = f"profile batch: {exc}"
                fail_job(coord, tenant, space, session_id, record.job_id or "", reason)
                return Next.DRAIN
        try:
            # Inside a drain's `together()` the commit and this batch are not flushed yet:
            # the job is done only once they are on disk.
            ctx.durable(tenant, space)
        except StoreUnavailable as exc:  # their flush failed: the store is read again
            fail_job(coord, tenant, space, session_id, record.job_id or "", str(exc))
            return Next.DRAIN
        _leave_sequence(coord, tenant, space, session_id)
        coord.jobs.update_job(
            tenant, record.job_id or "", state="done", counts=record.stats, reason=None
        )
        return Next.DRAIN
