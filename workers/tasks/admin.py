"""Reads of stored memory, admin writes (create a space, erasure, correction) and a liveness
ping, for producers that never open the store (the HTTP API)."""

from __future__ import annotations

import logging
import sqlite3
from typing import Any, get_args

from celery import Task
from pydantic import BaseModel

from common.errors import AtomMemError, failure
from common.memory.admin import administer
from common.memory.listings import read
from common.memory.rebuild import Plan
from common.models.jobs import AdminPayload, ReadPayload
from common.models.replies import Erasure
from common.models.responses import JobList, Ping
from common.producer import Producer
from common.queues import Queue, TaskName
from common.store.base import Kind, StoreUnavailable
from common.store.coordination.locks import space_lock
from common.store.persistence import rewrite_after_erasure
from workers import runtime
from workers.celery_app import app, observe_wait
from workers.replies import ReplyTask, forget_space
from workers.tasks.policy import AdminTask, task

log = logging.getLogger(__name__)


@task(TaskName.READ, base=ReplyTask)
def read_memory(self: Task, payload: dict[str, Any]) -> dict[str, Any]:
    """Spaces, facts, events or profiles as stored; read-only, so safe to run twice."""
    p = ReadPayload.model_validate(payload)
    observe_wait(Queue.QUERY, p.enqueued_at)
    try:
        return read(runtime.context(), p).model_dump(mode="json")
    except AtomMemError as exc:
        return failure(exc)


@task(TaskName.PING, base=ReplyTask, acks_late=False, reject_on_worker_lost=False)
def ping(self: Task, payload: dict[str, Any]) -> dict[str, Any]:
    """A worker answers and reaches the store (readiness)."""
    try:
        runtime.context().store.count(Kind.SPACES, "-", None)
    except Exception as exc:  # readiness reports any store failure, it never raises
        reply = Ping(worker=True, store=False, reason=f"{type(exc).__name__}: {exc}")
    else:
        reply = Ping(worker=True, store=True)
    return reply.model_dump(mode="json", exclude_none=True)


@task(TaskName.ADMIN, base=AdminTask, max_retries=150)  # waits out a commit holding the lock
def admin(self: Task, payload: dict[str, Any]) -> dict[str, Any]:
    """Create a space, erase, correct a fact or plan a rebuild under the space's lock
    (waiting, without blocking a slot, while a commit holds it); after an erasure, delete the
    space's stored replies and rewrite Redis's files, after a rebuild's plan, submit its
    sessions. Erasure recomputes from what is stored, a correction finds the fact corrected
    and a rebuild's jobs are the same jobs, so a rerun after a crash finishes any of them."""
    p = AdminPayload.model_validate(payload)
    observe_wait(Queue.MEMORY, p.enqueued_at)
    settings = runtime.settings()
    ctx, coord = runtime.context(), runtime.coordination()
    done: BaseModel | dict[str, str]
    with space_lock(coord.locks, p.tenant, p.space, settings.broker.lock_ttl_ms) as lock:
        if lock is None:
            raise self.retry(countdown=settings.broker.busy_retry_s)
        try:
            done = administer(ctx, coord, p)
        except AtomMemError as exc:
            done = failure(exc)
    if isinstance(done, Plan):
        # The same sessions into the same space are the same jobs: a redelivered rebuild
        # submits nothing twice.
        client = Producer(app, coord.jobs, coord.sequence)
        jobs = client.submit_many(p.tenant, [(p.space, s) for s in done.sessions])
        return JobList(items=jobs).model_dump(mode="json")
    if p.op in get_args(Erasure):  # a correction keeps the old text, in the fact's history
        # Even after a refused erasure: the rerun of one whose worker died ends here.
        forget_space(self, p.tenant, p.space)
        try:
            # the erased records leave the store's files (and the journal's) too; until they
            # have, the erasure is not acknowledged: its rerun compacts again
            ctx.store.compact()
            coord.scrub()
        except (AtomMemError, sqlite3.Error) as exc:
            log.error("after an erasure in space %r: %s", p.space, exc)
            done = failure(_scrub_failed(exc, erased=not isinstance(done, dict)))
        url = settings.broker.url
        if url:
            rewrite_after_erasure([url, settings.broker.result_url or url])
    return done if isinstance(done, dict) else done.model_dump(mode="json")


def _scrub_failed(exc: Exception, erased: bool) -> AtomMemError:
    """An erasure whose scrub failed: 503. Its records are erased already (a retried DELETE
    finds nothing), and the scrub is left pending: the store's next open or next erasure runs
    it (`scrub.pending`, common/store/edge.py), the journal's next erasure truncates its log."""
    why = str(exc) if isinstance(exc, AtomMemError) else f"the journal: {exc}"
    if not erased:  # refused (not found, in conflict): nothing was erased by this run
        return exc if isinstance(exc, AtomMemError) else StoreUnavailable(why)
    return StoreUnavailable(
        f"the records are erased, but removing their bytes from disk failed ({why}); that is "
        "pending and is finished at the store's next open or next erasure"
    )
