"""Ingest → extract (fan-out, parked per chunk) → memory (commit in session order, then the
session's profile batch in the same task).

With a broker, accepting, extracting and draining wait in per-tenant fair lanes and run from
`*.next` tasks, each taking a step of the tenant with the fewest running (workers.tasks.fair);
without a broker, or with `fair.enabled` off, each step is sent straight to its queue.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from celery import Task, group

from common.llm.budget import UNAVAILABLE, WAITING
from common.memory import stages
from common.models.jobs import (
    AcceptPayload,
    ExtractPayload,
    ProfilePayload,
    SpacePayload,
    TaskPayload,
)
from common.observability import tracing
from common.queues import Queue, TaskName
from workers import runtime
from workers.celery_app import app, observe_wait
from workers.tasks import fair
from workers.tasks.policy import BUSY_RETRIES, job_fails_on_permanent_error, send_drain, task


@task(TaskName.ACCEPT)
def accept(self: Task, payload: dict[str, Any]) -> None:
    """Store the raw session and fan its chunks out to extract (with fair lanes: queue that
    step in the tenant's memory lane); re-running re-sends the same chunks (extraction writes
    nothing) or finds the session further along."""
    p = AcceptPayload.model_validate(payload)
    lanes = fair.lanes()
    if lanes is None:
        _accept(p)
    else:
        step = fair.Step(f"accept:{p.job_id}", TaskName.ACCEPT, p)
        fair.offer(lanes, Queue.MEMORY, p.tenant, [step])


@tracing.stage("accept")
def _accept(p: AcceptPayload) -> None:
    observe_wait(Queue.INGEST, p.enqueued_at)
    ctx, coord = runtime.context(), runtime.coordination()
    with job_fails_on_permanent_error(p) as outcome:
        chunks = stages.accept_stage(ctx, coord, p)
    if outcome.failed:
        return
    if not chunks:
        _request_drain(p.tenant, p.space)
        return
    now = time.time()
    chunks = [c.model_copy(update={"enqueued_at": now}) for c in chunks]
    lanes = fair.lanes()
    if lanes is not None:
        steps = [
            fair.Step(f"{c.job_id}:{c.chunk}/{c.chunks}", TaskName.EXTRACT_CHUNK, c) for c in chunks
        ]
        fair.offer(lanes, Queue.EXTRACT, p.tenant, steps)
        return
    group(
        app.signature(TaskName.EXTRACT_CHUNK.value, kwargs={"payload": c.model_dump(mode="json")})
        for c in chunks
    ).apply_async()


@task(TaskName.EXTRACT_CHUNK)
def extract_chunk(self: Task, payload: dict[str, Any]) -> None:
    """Draft the facts of one chunk of turns (Fact Executor, metadata, embeddings) and park
    them; the chunk that completes the session asks for a drain. Writes no memory, so a
    redelivered chunk only parks the same drafts again; one whose job was erased meanwhile
    takes the session's drafts and calls out again, however it ends."""
    _extract_chunk(ExtractPayload.model_validate(payload))


@tracing.stage("extract")
def _extract_chunk(p: ExtractPayload) -> None:
    observe_wait(Queue.EXTRACT, p.enqueued_at)
    coord = runtime.coordination()
    job = coord.jobs.get_job(p.tenant, p.job_id)
    if job is not None and job.state == "failed":
        # Another chunk of this session failed (parking this one would only linger), or the
        # job was erased: what an earlier run parked after the erasure's drop goes now.
        stages.drop_if_erased(coord, p, job)
        return
    try:
        with job_fails_on_permanent_error(p) as outcome:
            complete = stages.extract_stage(runtime.context(), coord.chunks, p)
    finally:  # re-queued, retried or failed too: an erasure meanwhile leaves nothing parked
        gone = stages.abandoned(coord, p)
    if outcome.failed or gone:
        return  # erased while extracting (what it parked is gone again), or failed
    if job is not None and (job.reason or "").startswith((WAITING, UNAVAILABLE)):
        # it waited for its model, and its calls went through this time
        coord.jobs.update_job(p.tenant, p.job_id, reason=None)
    if complete:
        _request_drain(p.tenant, p.space)


@task(TaskName.DRAIN)
def drain(self: Task, payload: dict[str, Any]) -> None:
    """Commit the space's next session if it is ready; a stage interrupted mid-write is
    finished from its recorded plan, so re-running is safe."""
    _drain(SpacePayload.model_validate(payload))


@tracing.stage("drain")
def _drain(p: SpacePayload) -> None:
    observe_wait(Queue.MEMORY, p.enqueued_at)
    ctx = runtime.context()
    # The commit and the profile batch after it reach the disk with one flush: the profile
    # stage makes them durable before the job is done (`MemoryContext.durable`).
    with ctx.store.together():
        step = stages.drain_stage(ctx, runtime.coordination(), p.tenant, p.space)
        if step is stages.Next.PROFILE:
            # The session's profile batch runs here, in the task that committed it: a task
            # of its own cost a message, its events, an ack and the space's records read
            # again. A re-run of this drain (a budget wait, a crash) finds the session
            # committed and comes back here. The head is read again after the lock: the
            # profile stage acts only on a session that is committed, whichever it finds.
            head = runtime.coordination().sequence.head(p.tenant, p.space)
            if head is not None:  # (None would ask for an on-demand flush of the whole space)
                _profile(
                    ProfilePayload(enqueued_at=0.0, tenant=p.tenant, space=p.space, session_id=head)
                )
            return
    if step is stages.Next.DRAIN:
        _request_drain(p.tenant, p.space)
    elif step is stages.Next.BUSY:  # the holder may have died: a delayed drain, not a lane step
        BUSY_RETRIES.send(p.tenant, p.space, runtime.settings().broker.busy_retry_s)


def _request_drain(tenant: str, space: str) -> None:
    """A drain of the space: in its tenant's memory lane (one waiting per space), or sent."""
    lanes = fair.lanes()
    if lanes is None:
        send_drain(tenant, space)
        return
    request = SpacePayload(enqueued_at=time.time(), tenant=tenant, space=space)
    fair.offer(lanes, Queue.MEMORY, tenant, [fair.Step(f"drain:{space}", TaskName.DRAIN, request)])


_STEPS: dict[TaskName, Callable[[dict[str, Any]], None]] = {
    TaskName.ACCEPT: lambda body: _accept(AcceptPayload.model_validate(body)),
    TaskName.EXTRACT_CHUNK: lambda body: _extract_chunk(ExtractPayload.model_validate(body)),
    TaskName.DRAIN: lambda body: _drain(SpacePayload.model_validate(body)),
}


@task(TaskName.EXTRACT_NEXT)
def extract_next(self: Task, payload: dict[str, Any]) -> None:
    """Extract the next tenant's waiting chunk; a redelivered task takes the same chunk again,
    and parking it twice counts once."""
    _next(self, Queue.EXTRACT, payload)


@task(TaskName.MEMORY_NEXT)
def memory_next(self: Task, payload: dict[str, Any]) -> None:
    """Accept the next tenant's waiting session or drain its waiting space; a redelivered task
    takes the same step again, and both steps are idempotent."""
    _next(self, Queue.MEMORY, payload)


def _next(task: Task, lane: Queue, payload: dict[str, Any]) -> None:
    TaskPayload.model_validate(payload)
    with fair.turn(task, lane) as step:
        if step is not None:
            name, body = step
            _STEPS[name](body)


@task(TaskName.PROFILE)
def profile(self: Task, payload: dict[str, Any]) -> None:
    """The end-of-session profile batch (or an on-demand flush); a duplicate finds the
    session already done and does nothing."""
    _profile(ProfilePayload.model_validate(payload), self)


@tracing.stage("profile")
def _profile(p: ProfilePayload, task: Task | None = None) -> None:
    """`task`: the profile task, for an on-demand batch to try again while its space is busy
    (a session's batch runs inside the drain that committed it)."""
    observe_wait(Queue.PROFILE, p.enqueued_at)
    step = stages.profile_stage(
        runtime.context(), runtime.coordination(), p.tenant, p.space, p.session_id
    )
    busy_wait = runtime.settings().broker.busy_retry_s
    if step is stages.Next.BUSY and p.session_id is None and task is not None:
        raise task.retry(countdown=busy_wait, max_retries=30)  # on demand: try again
    if step is stages.Next.DRAIN:
        _request_drain(p.tenant, p.space)
    elif step is stages.Next.BUSY:
        BUSY_RETRIES.send(p.tenant, p.space, busy_wait)
