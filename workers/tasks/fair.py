"""The worker side of the fair lanes: offer a step to its tenant's lane with the task that will
run it, and hold the step a task takes until it is done.

Two lanes, named after the queues whose `*.next` tasks run them: `extract` (chunks) and
`memory` (accepting a session and draining a space: the steps that need the store; a tenant's
own steps keep their order, so its backlog is accepted, and extracted ahead, as its first
drains come). The `ingest` queue keeps only
`accept`, which with fair lanes just queues the session in its tenant's lane: a few
milliseconds, and sent ahead of every lane task and question (see LANE_PRIORITY).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from celery import Task
from celery.exceptions import Retry

from common.celery_config import send_payload
from common.llm.budget import BudgetShort
from common.models.jobs import TaskPayload
from common.observability import tracing
from common.queues import SHARED_PRIORITY, Queue, TaskName
from common.store.coordination.fair import FairLanes
from workers import runtime
from workers.celery_app import app
from workers.tasks.policy import TRANSIENT

# Lane tasks are interchangeable, so they can yield: Redis keeps a list per priority step and a
# worker reads every queue's default list before any lower one, so an `accept` (a few ms),
# a profile batch or a read never waits behind a backlog of lane tasks. Searches and asks
# share the lanes' step and take turns with them, so no question load starves ingestion
# (common.queues). (Their list is `<queue>\x06\x169`: whatever reads queue lengths must read
# it too; Flower does.)
LANE_PRIORITY = SHARED_PRIORITY

NEXT: dict[Queue, TaskName] = {
    Queue.EXTRACT: TaskName.EXTRACT_NEXT,
    Queue.MEMORY: TaskName.MEMORY_NEXT,
}


@dataclass(frozen=True)
class Step:
    """A step waiting in a lane: what to run and its payload (as a task would get it)."""

    key: str  # the same step offered again while it waits is queued once
    task: TaskName
    payload: TaskPayload


def lanes() -> FairLanes | None:
    """The fair lanes when they are on and a broker carries the work; None sends each step
    straight to its queue (the embedded default: one process, no other tenant to wait for)."""
    if not runtime.settings().fair.enabled:
        return None
    return runtime.coordination().fair


def offer(fair: FairLanes, lane: Queue, tenant: str, steps: Sequence[Step]) -> None:
    """Queue the steps in the tenant's lane and send one lane task per step (a step already
    waiting is not queued twice, but its task still goes: tasks never fall short of steps).
    Each step carries the trace it was offered in (W3C headers): whichever tenant's lane task
    runs it, its stage continues the job's trace (a step already waiting keeps its own)."""
    trace = tracing.carrier()
    entries = [(s.key, json.dumps(_entry(s, trace))) for s in steps]
    fair.offer(lane.value, tenant, entries)
    _send_next(lane, len(steps))


def _entry(step: Step, trace: dict[str, str]) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "task": step.task.value,
        "payload": step.payload.model_dump(mode="json"),
    }
    if trace:
        entry["trace"] = trace
    return entry


def _send_next(lane: Queue, count: int) -> None:
    body = TaskPayload(enqueued_at=time.time()).model_dump(mode="json")
    for _ in range(count):
        send_payload(app, NEXT[lane].value, body, priority=LANE_PRIORITY)


def lease_s() -> float:
    """How long a step may stay taken: past this its task is gone for good (a dead worker's
    unacked task comes back after the visibility timeout and the restore sweep, and runs for
    at most the hard time limit)."""
    b = runtime.settings().broker
    return b.visibility_timeout + b.unacked_restore_interval + b.time_limit


@contextmanager
def turn(task: Task, lane: Queue) -> Iterator[tuple[TaskName, dict[str, Any]] | None]:
    """The step this task runs, as (task name, payload): the next of the tenant with the
    fewest steps running, or the one it took before when it is a retry or a redelivery. Let go
    once the step is done or failed for good; a transient error or a short model budget
    keeps it for the retry under the same task id."""
    fair = runtime.coordination().fair
    if fair is None:  # a lane task on a worker without Redis coordination: nothing to take
        yield None
        return
    task_id, now = str(task.request.id), time.time()
    taken = fair.claim(lane.value, task_id, now, now - lease_s())
    _send_next(lane, taken.requeued)
    if taken.claim is None:
        yield None
        return
    step = json.loads(taken.claim.entry)
    try:
        with tracing.resumed(step.get("trace")):
            yield TaskName(step["task"]), step["payload"]
    except (Retry, BudgetShort, *TRANSIENT):  # the same step runs again under this task id
        raise
    except BaseException:
        fair.release(lane.value, task_id)
        raise
    fair.release(lane.value, task_id)
