"""Ingest → extract (fan-out, parked per chunk) → memory (commit in session order) → profile."""

from __future__ import annotations

import time
from typing import Any

import redis
from celery import Task, group
from qdrant_client.http.exceptions import ResponseHandlingException

from common.errors import AtomMemError
from common.memory import stages
from common.models.jobs import (
    AcceptPayload,
    ExtractPayload,
    ProfilePayload,
    SpacePayload,
)
from common.queues import Queue, TaskName
from workers import runtime
from workers.celery_app import app, observe_wait

# Transient: the broker, Redis or a Qdrant server briefly unreachable. Everything else is
# permanent and fails the job with its message at once.
TRANSIENT = (redis.ConnectionError, redis.TimeoutError, ConnectionError, ResponseHandlingException)
RETRY: dict[str, Any] = {
    "autoretry_for": TRANSIENT,
    "retry_backoff": True,
    "retry_backoff_max": 60,
    "retry_jitter": True,
    "max_retries": 5,
}


def _reason(exc: Exception) -> str:
    return str(exc) if isinstance(exc, AtomMemError) else f"{type(exc).__name__}: {exc}"


def send(name: TaskName, payload: Any, countdown: float | None = None) -> None:
    body = payload.model_copy(update={"enqueued_at": time.time()}).model_dump(mode="json")
    app.send_task(name.value, kwargs={"payload": body}, countdown=countdown)


def send_drain(tenant: str, space: str, countdown: float | None = None) -> None:
    send(TaskName.DRAIN, SpacePayload(enqueued_at=0.0, tenant=tenant, space=space), countdown)


@app.task(
    name=TaskName.ACCEPT.value,
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    ignore_result=True,
    **RETRY,
)
def accept(self: Task, payload: dict[str, Any]) -> None:
    """Store the raw session and fan its chunks out to extract; re-running re-sends the same
    chunks (extraction writes nothing) or finds the session further along."""
    p = AcceptPayload.model_validate(payload)
    observe_wait(Queue.INGEST, p.enqueued_at)
    ctx, coord = runtime.context(), runtime.coordinator()
    try:
        chunks = stages.accept_stage(ctx, coord, p)
    except TRANSIENT:
        raise
    except Exception as exc:  # permanent: the job says why, the space moves on
        stages.fail_job(coord, p.tenant, p.space, p.session.session_id, p.job_id, _reason(exc))
        send_drain(p.tenant, p.space)
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


@app.task(
    name=TaskName.EXTRACT.value,
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    ignore_result=True,
    **RETRY,
)
def extract(self: Task, payload: dict[str, Any]) -> None:
    """Draft the facts of one chunk of turns (Fact Executor, metadata, embeddings) and park
    them; the chunk that completes the session asks for a drain. Writes no memory, so a
    redelivered chunk only parks the same drafts again."""
    p = ExtractPayload.model_validate(payload)
    observe_wait(Queue.EXTRACT, p.enqueued_at)
    coord = runtime.coordinator()
    job = coord.get_job(p.tenant, p.job_id)
    if job is not None and job.state == "failed":
        return  # another chunk of this session failed: parking this one would only linger
    try:
        complete = stages.extract_stage(runtime.context(), coord, p)
    except TRANSIENT:
        raise
    except Exception as exc:  # permanent: the job says why, the space moves on
        stages.fail_job(coord, p.tenant, p.space, p.session.session_id, p.job_id, _reason(exc))
        send_drain(p.tenant, p.space)
        return
    if complete:
        send_drain(p.tenant, p.space)


@app.task(
    name=TaskName.DRAIN.value,
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    ignore_result=True,
    **RETRY,
)
def drain(self: Task, payload: dict[str, Any]) -> None:
    """Commit the space's next session if it is ready; a stage interrupted mid-write is
    finished from its recorded plan, so re-running is safe."""
    p = SpacePayload.model_validate(payload)
    observe_wait(Queue.MEMORY, p.enqueued_at)
    step = stages.drain_stage(runtime.context(), runtime.coordinator(), p.tenant, p.space)
    if step is stages.Next.PROFILE:
        head = runtime.coordinator().head(p.tenant, p.space)
        send(
            TaskName.PROFILE,
            ProfilePayload(enqueued_at=0.0, tenant=p.tenant, space=p.space, session_id=head),
        )
    elif step is stages.Next.DRAIN:
        send_drain(p.tenant, p.space)
    elif step is stages.Next.BUSY:
        send_drain(p.tenant, p.space, countdown=runtime.settings().broker.busy_retry_s)


@app.task(
    name=TaskName.PROFILE.value,
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    ignore_result=True,
    **RETRY,
)
def profile(self: Task, payload: dict[str, Any]) -> None:
    """The end-of-session profile batch (or an on-demand flush); a duplicate finds the
    session already done and does nothing."""
    p = ProfilePayload.model_validate(payload)
    observe_wait(Queue.PROFILE, p.enqueued_at)
    step = stages.profile_stage(
        runtime.context(), runtime.coordinator(), p.tenant, p.space, p.session_id
    )
    busy_wait = runtime.settings().broker.busy_retry_s
    if step is stages.Next.BUSY and p.session_id is None:
        raise self.retry(countdown=busy_wait, max_retries=30)  # on demand: try again
    if step is stages.Next.DRAIN:
        send_drain(p.tenant, p.space)
    elif step is stages.Next.BUSY:
        send_drain(p.tenant, p.space, countdown=busy_wait)
