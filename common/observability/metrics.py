"""Prometheus metrics: every metric AtomMem records, and the registry one exposition serves
(queue and lane depths are read from Redis at scrape time, common/store/coordination/depths.py).

Names are fixed (the benchmark and the dashboards in docs/operations.md read them); no label
carries a tenant, a space, a session or any text. Processes that fork (Celery's prefork pool,
several uvicorn workers) run prometheus_client's multiprocess mode: `PROMETHEUS_MULTIPROC_DIR`
names an empty directory before the process starts (prometheus_client reads it when first
imported), each process writes its samples to files there, and the exposition sums them.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import Metric
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead
from prometheus_client.registry import Collector

SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)

HTTP_REQUESTS = Counter(
    "atommem_http_requests",
    "HTTP requests the API answered, by route template, method and status",
    ["route", "method", "status"],
)
HTTP_DURATION = Histogram(
    "atommem_http_request_duration_seconds",
    "Time the API took to answer a request",
    ["route", "method", "status"],
    buckets=SECONDS,
)
TASK_DURATION = Histogram(
    "atommem_task_duration_seconds",
    "A task's run time in a worker, by its queue, name and outcome (success, retry, failure)",
    ["queue", "task", "outcome"],
    buckets=SECONDS,
)
STAGE_DURATION = Histogram(
    "atommem_stage_duration_seconds",
    "A pipeline stage's run time (accept, extract, drain, profile) inside its task; a drain "
    "includes the profile batch it runs after its commit",
    ["stage"],
    buckets=SECONDS,
)
# livesum: the processes alive now, summed; a pool child that died mid-task stops counting.
TASKS_IN_PROGRESS = Gauge(
    "atommem_tasks_in_progress",
    "Tasks running now",
    ["queue"],
    multiprocess_mode="livesum",
)
WORKER_SLOTS = Gauge(
    "atommem_worker_slots",
    "Concurrency of the workers consuming each queue",
    ["queue"],
    multiprocess_mode="livesum",
)
QUEUE_WAIT = Histogram(
    "atommem_queue_wait_seconds",
    "Time a task waited in its queue before a worker ran it",
    ["queue"],
    buckets=SECONDS,
)
JOBS = Counter("atommem_jobs", "Jobs ended, by outcome (done, failed, cancelled)", ["outcome"])
SUBMIT_TO_DONE = Histogram(
    "atommem_submit_to_done_seconds",
    "Time from a job's creation to its being done",
    buckets=SECONDS,
)
MODEL_CALLS = Counter(
    "atommem_model_calls",
    "Model calls, by endpoint (model@base_url), role and outcome (ok, error, throttled)",
    ["endpoint", "role", "outcome"],
)
MODEL_TOKENS = Counter(
    "atommem_model_tokens",
    "Tokens the model server reported, by endpoint, role and kind (prompt, completion)",
    ["endpoint", "role", "kind"],
)
MODEL_CALL_DURATION = Histogram(
    "atommem_model_call_duration_seconds",
    "Time of one HTTP call to a model endpoint",
    ["endpoint", "role"],
    buckets=SECONDS,
)
MODEL_IN_FLIGHT = Gauge(
    "atommem_model_calls_in_flight",
    "HTTP calls to a model endpoint under way now",
    ["endpoint"],
    multiprocess_mode="livesum",
)
MODEL_BUDGET_WAIT = Histogram(
    "atommem_model_budget_wait_seconds",
    "Time a call waited for its endpoint's budget before it was sent",
    ["endpoint"],
    buckets=SECONDS,
)
# The store-owning process sets these; the latest value of a live process is the store's.
STORE_POINTS = Gauge(
    "atommem_store_points",
    "Points in the store by kind",
    ["kind"],
    multiprocess_mode="livemostrecent",
)
STORE_BYTES = Gauge(
    "atommem_store_bytes",
    "Bytes on disk of the embedded store's directory",
    multiprocess_mode="livemostrecent",
)


def multiprocess_dir() -> Path | None:
    """The multiprocess directory prometheus_client chose at import (its own variable, read by
    it before any of ours: this module follows its choice rather than settings)."""
    found = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    return Path(found) if found else None


def job_ended(outcome: str, created_at: float) -> None:
    """A job left the open states: done, failed or cancelled (erased before it finished)."""
    JOBS.labels(outcome).inc()
    if outcome == "done":
        SUBMIT_TO_DONE.observe(max(0.0, time.time() - created_at))


@contextmanager
def model_call(endpoint: str, role: str) -> Iterator[None]:
    """One HTTP call to a model endpoint: in flight while the block runs, then its time."""
    in_flight = MODEL_IN_FLIGHT.labels(endpoint)
    in_flight.inc()
    started = time.perf_counter()
    try:
        yield
    finally:
        in_flight.dec()
        MODEL_CALL_DURATION.labels(endpoint, role).observe(time.perf_counter() - started)


def model_answered(
    endpoint: str,
    role: str,
    outcome: str,
    prompt_tokens: int,
    completion_tokens: int,
    waited_s: float | None,
) -> None:
    """How a call ended and what it cost; `waited_s` is None for an endpoint without budget."""
    MODEL_CALLS.labels(endpoint, role, outcome).inc()
    if prompt_tokens:
        MODEL_TOKENS.labels(endpoint, role, "prompt").inc(prompt_tokens)
    if completion_tokens:
        MODEL_TOKENS.labels(endpoint, role, "completion").inc(completion_tokens)
    if waited_s is not None:
        MODEL_BUDGET_WAIT.labels(endpoint).observe(waited_s)


def reap(directory: Path) -> None:
    """Forget the live gauges of processes that are gone (a pool child killed at its hard
    time limit never says so); prometheus_client's files name the process id."""
    for path in directory.glob("gauge_live*_*.db"):
        pid = path.stem.rsplit("_", 1)[-1]
        if pid.isdigit() and not _alive(int(pid)):
            mark_process_dead(int(pid), str(directory))  # type: ignore[no-untyped-call]


def clear_others(directory: Path) -> None:
    """Remove the samples of every other process (a previous run's, before this one forks):
    the directory must start empty, as prometheus_client's multiprocess mode requires."""
    mine = f"_{os.getpid()}.db"
    for path in directory.glob("*.db"):
        if not path.name.endswith(mine):
            with suppress(FileNotFoundError):
                path.unlink()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def registry(*collectors: Collector) -> CollectorRegistry:
    """What one exposition serves: this process's metrics, or every process's summed in
    multiprocess mode, plus the scrape-time collectors given."""
    directory = multiprocess_dir()
    if directory is None:
        served = CollectorRegistry(auto_describe=False)
        served.register(_Forward(REGISTRY))
    else:
        served = CollectorRegistry()
        served.register(_Reaping(directory))
    for collector in collectors:
        served.register(collector)
    return served


class _Forward(Collector):
    """The process's default registry, served beside the scrape-time collectors."""

    def __init__(self, source: CollectorRegistry) -> None:
        self._source = source

    def collect(self) -> Iterable[Metric]:
        return self._source.collect()


class _Reaping(Collector):
    """Every process's samples summed, after dropping the live gauges of dead ones."""

    def __init__(self, directory: Path) -> None:
        self._directory = directory
        self._summed = MultiProcessCollector(None, path=str(directory))  # type: ignore[no-untyped-call]

    def collect(self) -> Iterable[Metric]:
        reap(self._directory)
        found: Iterable[Metric] = self._summed.collect()  # type: ignore[no-untyped-call]
        return found
