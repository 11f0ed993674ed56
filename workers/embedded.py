"""The embedded default: the real task graph on an in-memory broker, one worker thread.

Accepted sessions are journaled in the SQLite coordination file, so a run that was interrupted
finds its unfinished jobs at the next start and sends them again (every task is idempotent).

Broker and result store are in-memory and wake their waiter when something lands: kombu's
memory transport sleeps `polling_interval` between empty reads and Celery's `.get()` sleeps its
`interval` between reads of the result, which together cost a query ~8 ms of pure waiting.
"""

from __future__ import annotations

import threading
import time
from queue import Empty
from typing import Any

from celery import states
from celery.apps.worker import Worker  # noqa: F401  (registers the worker's bootsteps)
from celery.backends.cache import CacheBackend
from celery.exceptions import TimeoutError as ResultTimeout
from celery.result import _set_task_join_will_block
from celery.worker import WorkController
from celery.worker import state as worker_state
from kombu.transport import memory

from common.celery_config import celery_config
from common.queues import Queue
from common.store.base import Kind
from common.store.coordination.locks import SqliteLocks
from workers import runtime
from workers.celery_app import app


class _Signal:
    """A change counter with a condition: a waiter that read the count before looking never
    misses a change made after it looked."""

    def __init__(self) -> None:
        self.changed = threading.Condition()
        self.count = 0

    def notify(self) -> None:
        with self.changed:
            self.count += 1
            self.changed.notify_all()

    def wait(self, seen: int, timeout: float) -> None:
        with self.changed:
            if self.count == seen:
                self.changed.wait(timeout)


_QUEUED = _Signal()  # a message was put, acked or rejected: a consumer may take one now
_STORED = _Signal()  # a result was stored


class _Channel(memory.Channel):
    def _put(self, queue: str, message: Any, **kwargs: Any) -> None:
        super()._put(queue, message, **kwargs)
        _QUEUED.notify()

    def _put_fanout(self, exchange: str, message: Any, routing_key: Any = None, **kw: Any) -> None:
        super()._put_fanout(exchange, message, routing_key, **kw)
        _QUEUED.notify()

    def basic_ack(self, delivery_tag: Any, multiple: bool = False) -> None:
        super().basic_ack(delivery_tag, multiple)
        _QUEUED.notify()  # a prefetch slot is free again

    def basic_reject(self, delivery_tag: Any, requeue: bool = False) -> None:
        super().basic_reject(delivery_tag, requeue)
        _QUEUED.notify()


class EmbeddedTransport(memory.Transport):
    """kombu's memory transport, waking its consumer on arrival rather than after a sleep;
    `polling_interval` only bounds each wait (shutdown and anything that did not notify)."""

    Channel = _Channel

    def drain_events(self, connection: Any, timeout: float | None = None, **_: Any) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        bound = self.polling_interval or 0.01
        cycle = self.cycle
        assert cycle is not None  # set when the transport is created
        while True:
            seen = _QUEUED.count
            try:
                cycle.get(self._deliver, timeout=timeout)
                return
            except Empty:
                left = bound if deadline is None else deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError() from None
                _QUEUED.wait(seen, min(left, bound))


class EmbeddedResults(CacheBackend):  # type: ignore[misc]
    """The process-wide in-memory result store; `.get()` wakes when its result is stored
    instead of re-reading it every `interval`."""

    def set(self, key: Any, value: Any) -> None:
        super().set(key, value)
        _STORED.notify()

    def wait_for(
        self,
        task_id: str,
        timeout: float | None = None,
        interval: float = 0.5,
        no_ack: bool = True,
        on_interval: Any = None,
    ) -> dict[str, Any]:
        self._ensure_not_eager()
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            seen = _STORED.count
            meta: dict[str, Any] = self.get_task_meta(task_id)
            if meta["status"] in states.READY_STATES:
                return meta
            if on_interval:
                on_interval()
            left = 1.0 if deadline is None else deadline - time.monotonic()
            if left <= 0:
                raise ResultTimeout("The operation timed out.")
            _STORED.wait(seen, min(left, 1.0))


def embedded_config() -> dict[str, Any]:
    """What the embedded mode changes in the shared Celery configuration, over
    `celery_config`: applied once the app is configured (`EmbeddedWorker.start`), as the
    app's configure hook applies `celery_config` over any update made before."""
    return {
        "broker_transport": f"{__name__}:EmbeddedTransport",
        "result_backend": f"{__name__}:EmbeddedResults",
        "cache_backend": "memory",
    }


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
        # Configure the app first (a no-op once it is): its hook applies `celery_config` when
        # it is first configured, over any update made before, and the embedded result store
        # would give way to the plain one (whose `.get()` polls every `interval`).
        app.conf.finalize()
        app.conf.update(celery_config(settings) | embedded_config())
        app.loader.import_default_modules()
        app.set_default()
        locks = runtime.coordination().locks
        if isinstance(locks, SqliteLocks):
            # Held by a process that is gone: local mode has one owner. The store is opened
            # first, so a process that does not own it (StoreBusy) leaves the locks alone.
            runtime.context().store.count(Kind.SPACES, "-", None)
            locks.clear_locks()
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
