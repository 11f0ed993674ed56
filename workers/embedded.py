"""The embedded default: the real task graph on an in-memory broker, one worker thread.

Accepted sessions are journaled in the SQLite coordination file, so a run that was interrupted
finds its unfinished jobs at the next start and sends them again (every task is idempotent).
"""

from __future__ import annotations

import threading
from typing import Any

from celery.apps.worker import Worker  # noqa: F401  (registers the worker's bootsteps)
from celery.result import _set_task_join_will_block
from celery.worker import WorkController
from celery.worker import state as worker_state

from common.celery_config import celery_config
from common.queues import Queue
from common.store.coordination.locks import SqliteLocks
from workers import runtime
from workers.celery_app import app


class _Controller(WorkController):  # type: ignore[misc]
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.ready = threading.Event()
        super().__init__(*args, **kwargs)

    def on_consumer_ready(self, consumer: Any) -> None:
        self.ready.set()


class EmbeddedWorker:
    """An in-process worker consuming every queue of the in-memory broker."""

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None
        self._controller: _Controller | None = None

    def start(self, timeout: float = 60.0) -> None:
        settings = runtime.settings()
        if settings.broker.url:
            raise RuntimeError("the embedded worker is for runs without a broker")
        app.conf.update(celery_config(settings))
        app.loader.import_default_modules()
        app.set_default()
        locks = runtime.coordination().locks
        if isinstance(locks, SqliteLocks):
            locks.clear_locks()  # held by a process that is gone: local mode has one owner
        worker_state.should_terminate = None
        self._controller = _Controller(
            app=app,
            concurrency=settings.broker.worker_concurrency,
            pool="threads",
            queues=[q.value for q in Queue],
            loglevel="WARNING",
            without_heartbeat=True,
            without_mingle=True,
            without_gossip=True,
        )
        self._thread = threading.Thread(target=self._controller.start, daemon=True)
        self._thread.start()
        if not self._controller.ready.wait(timeout):
            raise RuntimeError("the embedded worker did not start")
        _set_task_join_will_block(False)

    def stop(self, timeout: float = 30.0) -> None:
        if self._thread is None:
            return
        worker_state.should_terminate = 0
        self._thread.join(timeout)
        worker_state.should_terminate = None
        self._thread = None
