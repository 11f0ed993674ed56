"""The Celery app: configured from settings when first used, tasks in workers.tasks."""

from __future__ import annotations

import time
from typing import Any

from celery import Celery
from celery.signals import worker_process_init

from common.celery_config import celery_config
from workers import runtime

app = Celery(
    "atommem", include=["workers.tasks.pipeline", "workers.tasks.query", "workers.tasks.admin"]
)


@app.on_configure.connect
def _configure(sender: Celery, **_: Any) -> None:
    sender.conf.update(celery_config(runtime.settings()))


@worker_process_init.connect
def _fresh_clients(**_: Any) -> None:
    runtime.reset()


def observe_wait(queue: str, enqueued_at: float) -> None:
    """Record how long a task sat in its queue (for the benchmark's medians)."""
    if enqueued_at > 0:
        runtime.coordination().waits.record_wait(queue, max(0.0, time.time() - enqueued_at))
