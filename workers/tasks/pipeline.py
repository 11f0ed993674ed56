"""Ingest → extract (fan-out, parked per chunk) → memory (commit in session order) → profile."""

from __future__ import annotations

import time
from typing import Any

from celery import Task, group

from common.memory import stages
from common.models.jobs import AcceptPayload, ExtractPayload, ProfilePayload, SpacePayload
from common.queues import Queue, TaskName
from workers import runtime
from workers.celery_app import app, observe_wait
from workers.tasks.policy import job_fails_on_permanent_error, send, send_drain, task


@task(TaskName.ACCEPT)
def accept(self: Task, payload: dict[str, Any]) -> None:
    """Store the raw session and fan its chunks out to extract; re-running re-sends the same
    chunks (extraction writes nothing) or finds the session further along."""
    p = AcceptPayload.model_validate(payload)
    observe_wait(Queue.INGEST, p.enqueued_at)
    ctx, coord = runtime.context(), runtime.coordination()
    with job_fails_on_permanent_error(p) as outcome:
        chunks = stages.accept_stage(ctx, coord, p)
    if outcome.failed:
        return
    if not chunks:
        send_drain(p.tenant, p.space)
        return
    now = time.time()
    group(
        app.signature(
            TaskName.EXTRACT.value,
            kwargs={"payload": c.model_copy(update={"enqueued_at": now}).model_dump(mode="json")},
        )
        for c in chunks
    ).apply_async()


@task(TaskName.EXTRACT)
def extract(self: Task, payload: dict[str, Any]) -> None:
    """Draft the facts of one chunk of turns (Fact Executor, metadata, embeddings) and park
    them; the chunk that completes the session asks for a drain. Writes no memory, so a
    redelivered chunk only parks the same drafts again."""
    p = ExtractPayload.model_validate(payload)
    observe_wait(Queue.EXTRACT, p.enqueued_at)
    coord = runtime.coordination()
    job = coord.jobs.get_job(p.tenant, p.job_id)
    if job is not None and job.state == "failed":
        return  # another chunk of this session failed: parking this one would only linger
    with job_fails_on_permanent_error(p) as outcome:
        complete = stages.extract_stage(runtime.context(), coord.chunks, p)
    if not outcome.failed and complete:
        send_drain(p.tenant, p.space)


@task(TaskName.DRAIN)
def drain(self: Task, payload: dict[str, Any]) -> None:
    """Commit the space's next session if it is ready; a stage interrupted mid-write is
    finished from its recorded plan, so re-running is safe."""
    p = SpacePayload.model_validate(payload)
    observe_wait(Queue.MEMORY, p.enqueued_at)
    step = stages.drain_stage(runtime.context(), runtime.coordination(), p.tenant, p.space)
    if step is stages.Next.PROFILE:
        head = runtime.coordination().sequence.head(p.tenant, p.space)
        send(
            TaskName.PROFILE,
            ProfilePayload(enqueued_at=0.0, tenant=p.tenant, space=p.space, session_id=head),
        )
    elif step is stages.Next.DRAIN:
        send_drain(p.tenant, p.space)
    elif step is stages.Next.BUSY:
        send_drain(p.tenant, p.space, countdown=runtime.settings().broker.busy_retry_s)


@task(TaskName.PROFILE)
def profile(self: Task, payload: dict[str, Any]) -> None:
    """The end-of-session profile batch (or an on-demand flush); a duplicate finds the
    session already done and does nothing."""
    p = ProfilePayload.model_validate(payload)
    observe_wait(Queue.PROFILE, p.enqueued_at)
    step = stages.profile_stage(
        runtime.context(), runtime.coordination(), p.tenant, p.space, p.session_id
    )
    busy_wait = runtime.settings().broker.busy_retry_s
    if step is stages.Next.BUSY and p.session_id is None:
        raise self.retry(countdown=busy_wait, max_retries=30)  # on demand: try again
    if step is stages.Next.DRAIN:
        send_drain(p.tenant, p.space)
    elif step is stages.Next.BUSY:
        send_drain(p.tenant, p.space, countdown=busy_wait)
