"""The Celery app: configured from settings when first used, tasks in workers.tasks."""

from __future__ import annotations

import time
from typing import Any

from celery import Celery
from celery.app import trace
from celery.signals import (
    heartbeat_sent,
    worker_process_init,
    worker_process_shutdown,
    worker_ready,
    worker_shutdown,
)

import workers.metrics  # connects the task metrics to the signals, serves the port
import workers.telemetry  # noqa: F401 - connects traces and JSON logs to the signals
from common.celery_config import celery_config
from workers import probe, runtime
from workers.query_slots import QuerySlots

app = Celery(
    "atommem", include=["workers.tasks.pipeline", "workers.tasks.query", "workers.tasks.admin"]
)
app.steps["worker"].add(QuerySlots)


@app.on_configure.connect
def _configure(sender: Celery, **_: Any) -> None:
    sender.conf.update(celery_config(runtime.settings()))


@worker_process_init.connect
def _fresh_clients(**_: Any) -> None:
    runtime.reset()


@worker_process_shutdown.connect
@worker_shutdown.connect
def _close_clients(**_: Any) -> None:
    """A worker stopping in order saves what the next one should not rebuild (the indexes of
    large embedded spaces) and closes the store."""
    runtime.reset()


@worker_ready.connect
@heartbeat_sent.connect
def _mark_alive(**_: Any) -> None:
    """The consumer loop is connected and turning: the probes' file (workers/probe.py).
    Celery sends its worker heartbeat every 2 s."""
    probe.mark_alive()


def observe_wait(queue: str, enqueued_at: float) -> None:
    """Record how long a task sat in its queue (for the benchmark's medians)."""
    if enqueued_at > 0:
        waited = max(0.0, time.time() - enqueued_at)
        runtime.coordination().waits.record_wait(queue, waited)
        workers.metrics.waited(queue, waited)


# A task's return value is a reply full of memory: the success line names the task, never
# what it returned (replies must not outlive an erasure in a log file).
trace.LOG_SUCCESS = "Task %(name)s[%(id)s] succeeded in %(runtime)ss"
