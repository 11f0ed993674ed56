"""A worker's Prometheus metrics: task run times, tasks in progress and slots per queue, the
store's size from the process that owns it, served on `metrics.port` by the worker's main
process (every pool child's samples summed when the pool forks).

Connected by importing this module (workers/celery_app.py does). The port is off by default.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis
from celery.concurrency.prefork import TaskPool as PreforkPool
from celery.signals import task_postrun, task_prerun, worker_init, worker_ready, worker_shutdown
from prometheus_client import start_http_server

from common.observability import metrics
from common.queues import TASK_QUEUE, TaskName
from common.store import keys
from common.store.base import Kind
from common.store.coordination.depths import QueueDepths
from workers import runtime

log = logging.getLogger(__name__)

_OUTCOMES = {"SUCCESS": "success", "RETRY": "retry"}  # every other end state is a failure
# Tasks of these queues use the store: only their processes count its points.
_STORE_QUEUES = frozenset({"memory", "profile", "query"})


@dataclass
class _State:
    """What this process knows of its worker and its running tasks."""

    started: dict[str, tuple[float, str]] = field(default_factory=dict)  # task id: (t0, queue)
    worker: Any = None  # the WorkController, in the main process
    counted_at: float = float("-inf")
    counting: threading.Lock = field(default_factory=threading.Lock)
    tenants: redis.Redis | None = None
    server: Any = None


_STATE = _State()


def queue_of(task: Any) -> str:
    """The queue a task runs from: its route, else what delivered it."""
    try:
        return TASK_QUEUE[TaskName(task.name)].value
    except ValueError:
        info = getattr(task.request, "delivery_info", None) or {}
        return str(info.get("routing_key") or "unknown")


@task_prerun.connect
def _task_started(task_id: str | None = None, task: Any = None, **_: Any) -> None:
    if task_id is None or task is None:
        return
    queue = queue_of(task)
    _STATE.started[task_id] = (time.perf_counter(), queue)
    metrics.TASKS_IN_PROGRESS.labels(queue).inc()


@task_postrun.connect
def _task_ended(
    task_id: str | None = None, task: Any = None, state: str | None = None, **_: Any
) -> None:
    """One end per run, whatever the outcome (Celery sends postrun after a retry and a
    failure too, with the state it ended in)."""
    if task_id is None or task is None:
        return
    began = _STATE.started.pop(task_id, None)
    if began is None:
        return
    t0, queue = began
    metrics.TASKS_IN_PROGRESS.labels(queue).dec()
    outcome = _OUTCOMES.get(state or "", "failure")
    metrics.TASK_DURATION.labels(queue, task.name, outcome).observe(time.perf_counter() - t0)
    if queue in _STORE_QUEUES:
        count_store()


def count_store() -> None:
    """Recount the store's points and bytes, at most once per `metrics.store_refresh_s`, in
    the process that owns the store and only when someone scrapes (the port is on): never at
    scrape time, so a scrape never waits on the store."""
    settings = runtime.settings()
    if settings.metrics.port == 0 or not _STATE.counting.acquire(blocking=False):
        return
    try:
        now = time.monotonic()
        if now - _STATE.counted_at < settings.metrics.store_refresh_s:
            return
        _STATE.counted_at = now
        store = runtime.context().store  # open already: a memory or query task just used it
        tenants = {settings.tenant}
        if settings.broker.url is not None:
            if _STATE.tenants is None:
                _STATE.tenants = redis.Redis.from_url(
                    settings.broker.url, decode_responses=True, socket_timeout=5
                )
            tenants |= {str(t) for t in _STATE.tenants.smembers(keys.TENANTS)}
        for kind in Kind:
            metrics.STORE_POINTS.labels(kind.value).set(
                sum(store.count(kind, tenant, None) for tenant in sorted(tenants))
            )
        if settings.store.qdrant_url is None:
            metrics.STORE_BYTES.set(_size_on_disk(settings.store.qdrant_path))
    except Exception:  # a count that fails is tried again next time; the task's result stands
        log.warning("could not count the store for its metrics", exc_info=True)
    finally:
        _STATE.counting.release()


def _size_on_disk(path: Path) -> int:
    total = 0
    for item in path.rglob("*"):
        try:
            total += item.lstat().st_blocks * 512  # allocated: the engine's files are sparse
        except OSError:
            continue
    return total


@worker_init.connect
def _worker_starting(sender: Any = None, **_: Any) -> None:
    """In the main process, before the pool forks: note the pool, and clear a previous
    run's samples from the multiprocess directory."""
    if getattr(sender, "inner", False):
        return  # the query consumer inside the worker (workers.query_slots), not its pool
    _STATE.worker = sender
    directory = metrics.multiprocess_dir()
    if directory is not None:
        metrics.clear_others(directory)


@worker_ready.connect
def _worker_ready(sender: Any = None, **_: Any) -> None:
    """The pool is up: count its slots per queue consumed and open the port."""
    worker = _STATE.worker
    slots = int(getattr(worker, "concurrency", 0) or 0)
    if sender is not None:
        for queue in sender.app.amqp.queues.consume_from:
            metrics.WORKER_SLOTS.labels(str(queue)).set(slots)
    pool = getattr(worker, "pool_cls", None)
    serve(forks=isinstance(pool, type) and issubclass(pool, PreforkPool))


def serve(forks: bool) -> None:
    """Open the metrics port (once, in the main process) when `metrics.port` is set."""
    cfg = runtime.settings().metrics
    if cfg.port == 0 or _STATE.server is not None:
        return
    if forks and metrics.multiprocess_dir() is None:
        log.error(
            "metrics are off: ATOMMEM_METRICS__PORT=%d with a forking pool needs "
            "PROMETHEUS_MULTIPROC_DIR (an empty directory) in the worker's environment, or "
            "the pool children's samples would be lost",
            cfg.port,
        )
        return
    collectors = []
    broker = runtime.settings().broker.url
    if cfg.queues and broker is not None:
        collectors.append(QueueDepths(broker))
    server, _thread = start_http_server(cfg.port, cfg.host, registry=metrics.registry(*collectors))
    _STATE.server = server
    log.info("metrics on http://%s:%d/metrics", cfg.host, cfg.port)


@worker_shutdown.connect
def _close(**_: Any) -> None:
    if _STATE.server is not None:
        _STATE.server.shutdown()
        _STATE.server = None


def waited(queue: str, seconds: float) -> None:
    """How long a task sat in its queue (workers.celery_app.observe_wait measures it)."""
    metrics.QUEUE_WAIT.labels(queue).observe(seconds)
