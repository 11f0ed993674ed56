"""A worker's traces and JSON logs, wired to Celery's signals: tracing set up once per
process that runs tasks (each child of a prefork pool), Celery's own log lines written as
JSON, and each task's ids in the log context while it runs.

Connected by importing this module (workers/celery_app.py does).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from contextvars import Token
from typing import Any

import celery.apps.worker as celery_worker
from celery import concurrency
from celery.concurrency.prefork import TaskPool as PreforkPool
from celery.signals import (
    after_setup_logger,
    after_setup_task_logger,
    celeryd_init,
    task_postrun,
    task_prerun,
    worker_init,
    worker_process_init,
    worker_process_shutdown,
    worker_shutdown,
)

from common.observability import logs, tracing
from workers import runtime

# Each running task's log scope, by task id (a thread pool runs several at once).
_scopes: dict[str, Token[dict[str, str | int] | None]] = {}


def _json() -> bool:
    return runtime.settings().log.format == "json"


@celeryd_init.connect
def _json_from_the_start(instance: Any = None, **_: Any) -> None:
    """With JSON logs every line of the worker's output is an object: the startup banner
    (plain text on stdout) is left out (`celery inspect` and the `ready.` line say the rest),
    and Python's warnings go through logging, as JSON on stderr until Celery sets up its
    handlers (the next thing it does warns when run as root)."""
    if instance is None or not _json():
        return
    instance.quiet = True
    celery_worker.safe_say = _say
    logging.captureWarnings(True)
    root = logging.getLogger()
    if not root.handlers:  # Celery's setup replaces it (`worker_hijack_root_logger`)
        early = logging.StreamHandler(sys.stderr)
        early.setFormatter(logs.JsonFormatter())
        root.addHandler(early)


def _say(msg: str, f: Any = sys.__stderr__) -> None:
    """What Celery writes from its signal handlers (warm or cold shutdown, restart), as a
    JSON line: written straight to the descriptor as Celery's own `safe_say` does (logging's
    locks have no place in a signal handler)."""
    write = getattr(celery_worker, "_original_os_write", os.write)
    with contextlib.suppress(OSError, ValueError, AttributeError):
        write(f.fileno(), (logs.line("WARNING", "celery.apps.worker", msg.strip()) + "\n").encode())


@after_setup_logger.connect
@after_setup_task_logger.connect
def _json_lines(logger: logging.Logger | None = None, **_: Any) -> None:
    """Celery's handlers stay (stderr or `--logfile`, at `-l`); their lines become JSON."""
    if logger is not None and _json():
        logs.use_json([logger])


def _forks(worker: Any) -> bool:
    pool = worker.pool_cls
    pool = concurrency.get_implementation(pool) if isinstance(pool, str) else pool
    return isinstance(pool, type) and issubclass(pool, PreforkPool)


@worker_init.connect
def _trace_in_place(sender: Any = None, **_: Any) -> None:
    """A thread or solo pool runs tasks in this process: trace here. A prefork pool's
    children each set up their own (exporter threads do not survive a fork)."""
    if sender is not None and not _forks(sender):
        tracing.instrument_celery(runtime.settings().tracing, tracing.WORKER)


@worker_process_init.connect
def _trace_in_child(**_: Any) -> None:
    tracing.instrument_celery(runtime.settings().tracing, tracing.WORKER)


@worker_process_shutdown.connect
@worker_shutdown.connect
def _flush_spans(**_: Any) -> None:
    tracing.shutdown()


@task_prerun.connect
def _task_scope(
    task_id: str | None = None, task: Any = None, kwargs: dict[str, Any] | None = None, **_: Any
) -> None:
    """The task's ids, from its raw payload, on every line it logs (Celery's own included);
    a lane task's step adds its own (tracing.stage_span)."""
    if task_id is None:
        return
    ids = logs.payload_ids((kwargs or {}).get("payload"))
    _scopes[task_id] = logs.open_scope(task_id=task_id, task=getattr(task, "name", None), **ids)


@task_postrun.connect
def _task_scope_ends(task_id: str | None = None, **_: Any) -> None:
    token = _scopes.pop(task_id, None) if task_id is not None else None
    if token is not None:
        # ended in another context than it began in: nothing to undo there
        with contextlib.suppress(ValueError):
            logs.close_scope(token)
