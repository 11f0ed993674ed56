"""The policy every task shares: how it is registered (acks, retries, results), what counts as
transient, how a permanent error ends its job, and how a step sends the next one by name."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import redis
from celery import Task
from celery.exceptions import Retry
from qdrant_client.http.exceptions import ResponseHandlingException

from common.celery_config import send_payload
from common.errors import AtomMemError
from common.llm import budget
from common.llm.budget import BudgetShort, ModelUnavailable
from common.memory import stages
from common.models.jobs import AcceptPayload, ExtractPayload, SpacePayload
from common.queues import TaskName
from common.store.coordination.liveness import JOB_LIVENESS
from workers import runtime
from workers.celery_app import app
from workers.leases import start_job_liveness
from workers.replies import ReplyTask

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


def budget_countdown(short: BudgetShort) -> float:
    """When a task the model budget sent back runs again: when the budget may allow it, but
    well within the visibility timeout (an ETA task is unacked while it waits) and within the
    sweep's patience (each return refreshes its job's progress)."""
    b = runtime.settings().broker
    return max(0.5, min(short.retry_in, b.job_stale_s / 2, b.visibility_timeout / 2))


# The message header a task re-queued for an outage carries (its kwargs are checked against
# the task's signature): when its calls began failing (epoch s), so that across its runs it
# fails once it has been failing for `llm.outage_s`. A retry or re-queue keeps its headers.
FAILING_SINCE = "atommem_failing_since"


def requeued_options(request: Any, short: BudgetShort) -> dict[str, Any]:
    """The options of the task's next run beyond its request's own: an outage notes (or
    keeps) when its calls began failing; a short budget keeps the headers as they are (with
    what an earlier outage noted)."""
    if not isinstance(short, ModelUnavailable):
        return {}
    headers = request.as_execution_options()["headers"]
    return {"headers": {**headers, FAILING_SINCE: short.since}}


def failing_since(request: Any) -> float | None:
    """When the task's calls began failing on an earlier run, from its message headers."""
    since = getattr(request, FAILING_SINCE, None)
    if since is None:
        since = (getattr(request, "headers", None) or {}).get(FAILING_SINCE)
    return float(since) if isinstance(since, int | float) else None


def requeue(task: Task, short: BudgetShort) -> Retry:
    """Send the task again, same id and payload, in a while: backpressure, not a failure, so
    unlike `task.retry` it leaves the retry count (the budget for transient errors) alone."""
    countdown = budget_countdown(short)
    again = task.signature_from_request(
        task.request,
        None,
        None,
        countdown=countdown,
        retries=task.request.retries,
        **requeued_options(task.request, short),
    )
    again.apply_async()
    return Retry(f"{short} (again in {countdown:g} s)", when=countdown, sig=again)


class JobTask(Task):  # type: ignore[misc]
    """A task that must finish: it marks the job in its payload alive while it runs (see
    workers.leases), and goes back to its queue for a while when its model budget is short.
    The base of the pipeline's steps."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        start_job_liveness()
        try:
            with budget.task_scope(failing_since(self.request)):
                return self._run_for_job(*args, **kwargs)
        except BudgetShort as short:
            if self.request.called_directly:
                raise
            raise requeue(self, short) from None

    def _run_for_job(self, *args: Any, **kwargs: Any) -> Any:
        payload = kwargs.get("payload")
        if not isinstance(payload, dict):
            return super().__call__(*args, **kwargs)
        tenant, job_id = payload.get("tenant"), payload.get("job_id")
        if not isinstance(tenant, str) or not isinstance(job_id, str):
            return super().__call__(*args, **kwargs)
        with JOB_LIVENESS.working_on(tenant, job_id):
            return super().__call__(*args, **kwargs)


class AdminTask(ReplyTask, JobTask):
    """An admin write: its reply is read by a waiting caller and goes with an erasure of its
    space (a ReplyTask; the producer sets no deadline, since an erasure still runs after its
    caller gave up), and like a job's step it must finish, so a short model budget sends it
    back to its queue rather than failing it (a JobTask)."""


def task(name: TaskName, *, base: type[Task] = JobTask, **overrides: Any) -> Callable[..., Task]:
    """Register a task under its stable name: bound, acked late and rejected when its worker is
    lost (so a killed worker's task is redelivered: every task is idempotent), transient errors
    retried with backoff. `base` says what kind of task it is: a JobTask (the default, a
    pipeline step) ignores its result; a ReplyTask (a query, a read, the ping) keeps it for
    the caller waiting on it, and is no JobTask: a question short of model budget is never
    sent back to its queue while its caller waits; an AdminTask is both."""
    options: dict[str, Any] = {
        "name": name.value,
        "base": base,
        "bind": True,
        "acks_late": True,
        "reject_on_worker_lost": True,
        "ignore_result": not issubclass(base, ReplyTask),
        **RETRY,
    }
    options.update(overrides)
    return app.task(**options)  # type: ignore[no-any-return]


def send(name: TaskName, payload: Any, countdown: float | None = None) -> None:
    """Send the next step by name, stamped with when it was queued."""
    body = payload.model_copy(update={"enqueued_at": time.time()}).model_dump(mode="json")
    send_payload(app, name.value, body, countdown=countdown)


def send_drain(tenant: str, space: str, countdown: float | None = None) -> None:
    send(TaskName.DRAIN, SpacePayload(enqueued_at=0.0, tenant=tenant, space=space), countdown)


class _BusyRetries:
    """When this process's delayed drain of each space is due. A drain that finds its space
    locked sends one a little later, in case the lock's holder died (a live holder asks for
    the next drain itself): one such drain per space and process is enough. Without the
    bound every drain that met the lock sent another, and each of those another on meeting
    it again, so the drains circling a busy space grew with the length of its ingest
    (hundreds, late in a 100k-fact one, every one a task and a lock read every 2 s)."""

    def __init__(self) -> None:
        self._due: dict[tuple[str, str], float] = {}  # until when another is not sent
        self._lock = threading.Lock()

    def send(self, tenant: str, space: str, countdown: float) -> None:
        """A drain of the space in `countdown` seconds, unless this process sent one less
        than half of that ago. The one sent always finds the mark gone when it runs (half
        its delay before it may), so it is free to send the next: a space locked by a dead
        holder always has a drain coming."""
        now = time.monotonic()
        with self._lock:
            if self._due.get((tenant, space), 0.0) > now:
                return
            self._due[(tenant, space)] = now + countdown / 2
            for key in [k for k, due in self._due.items() if due <= now]:
                del self._due[key]  # spaces no longer busy
        send_drain(tenant, space, countdown)


BUSY_RETRIES = _BusyRetries()


def reason(exc: Exception) -> str:
    return str(exc) if isinstance(exc, AtomMemError) else f"{type(exc).__name__}: {exc}"


@dataclass
class Outcome:
    failed: bool = False


@contextmanager
def job_fails_on_permanent_error(p: AcceptPayload | ExtractPayload) -> Iterator[Outcome]:
    """Run a session's step: a transient error propagates (Celery retries it), a short model
    budget or a failing model endpoint too (the task is re-queued, the job says what it
    waits for); any other error fails the job with its reason and asks for a drain, so the
    space moves on."""
    outcome = Outcome()
    try:
        yield outcome
    except TRANSIENT:
        raise
    except BudgetShort as short:
        why = stages.waiting(short, runtime.settings().llm.outage_s)
        stages.wait_for_budget(runtime.coordination(), p.tenant, p.job_id, why)
        raise
    except Exception as exc:  # permanent: the job says why, the space moves on
        coord = runtime.coordination()
        stages.fail_job(coord, p.tenant, p.space, p.session.session_id, p.job_id, reason(exc))
        send_drain(p.tenant, p.space)
        outcome.failed = True
