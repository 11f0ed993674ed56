"""Questions first: a worker that consumes the query queue beside others (the store's owner)
answers questions on its own in-process consumer and threads, so a question never waits for
a pool thread held by a commit or an extract.

A worker bootstep takes `query` out of the main consumer's queues and runs a second
WorkController on a thread of the same process (the store is opened once per process),
consuming only `query` with `broker.query_concurrency` threads. The main pool keeps the other
queues, its threads at a lower CPU priority (`POOL_NICE`, Linux: per thread, inherited by the
model's OpenMP threads each one starts), so on a busy machine a question gets the cores
first. Off without a broker (the embedded worker), with a forking pool (its children own
their clients, the parent has none), for a worker of questions alone, and at concurrency 0.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from typing import Any

from celery import bootsteps
from celery.concurrency.prefork import TaskPool as PreforkPool
from celery.signals import task_prerun
from celery.worker import WorkController, loops
from celery.worker import state as worker_state
from celery.worker.consumer import Consumer
from celery.worker.consumer.tasks import Tasks

from common.observability import metrics
from common.queues import TASK_QUEUE, Queue
from workers import runtime

log = logging.getLogger(__name__)

# Measured with bench.fairness on 2 busy cores: flooded search p50 220 -> 133 ms.
POOL_NICE = 10
_QUERY_TASKS = frozenset(n.value for n, q in TASK_QUEUE.items() if q is Queue.QUERY)
_yielding: set[int] = set()  # the main pool's threads already lowered
_lane_on = threading.Event()
# How long the query consumer's loop waits for the broker while every slot holds a question.
FULL_WAIT_S = 0.01
# The pause of the query consumer's transport after a read that found nothing, before it
# reads again (`broker.polling_interval` elsewhere, 10 ms).
POLL_S = 0.001


@task_prerun.connect
def _pool_yields(task: Any = None, **_: Any) -> None:
    """A main pool thread, at its first task, lowers its own priority (once: going back up
    needs a privilege)."""
    if not _lane_on.is_set() or task is None or task.name in _QUERY_TASKS:
        return
    tid = threading.get_native_id()
    if tid in _yielding or not sys.platform.startswith("linux"):
        return
    _yielding.add(tid)
    try:
        os.setpriority(os.PRIO_PROCESS, tid, POOL_NICE)
    except OSError as exc:
        log.warning("the pool thread's priority stays: %s", exc)


class _OnlyQueries(bootsteps.StartStopStep):  # type: ignore[misc]
    """Points the task consumer at `query` alone, before the loop starts consuming (the
    app's queue selection is the main consumer's, shared by every consumer in the process)."""

    requires = (Tasks,)

    def start(self, c: Any) -> None:
        consumer = c.task_consumer
        consumer.queues = [c.app.amqp.queues[Queue.QUERY.value](consumer.channel)]
        consumer.declare()


class _Prompt:
    """The consumer's connection as the query loop drains it. This controller runs Celery's
    blocking loop (`synloop`: the event loop is per process), which reads through kombu's
    polling path where the main consumer waits on the event loop. Two of that path's waits
    held questions back:
    - While every slot holds a question, the prefetch is used up and the Redis transport
      does not wait on the queue at all: it waits out the loop's 2 s drain timeout (on the
      control channel's socket, or asleep for 1 s where there is none). A slot freed
      meanwhile stayed empty, and with as many clients asking at once as there are
      slots every answer came 2 s late. While the slots are full, the loop now looks again
      every `FULL_WAIT_S`.
    - After a read that finds nothing the transport pauses `polling_interval` (10 ms) before
      it reads again, and a question often arrived in that pause: a question on the slots
      took 9 ms longer to reach its thread than one on the main consumer (bench.query_clients).
      This consumer's transport pauses `POLL_S`."""

    def __init__(self, connection: Any, consumer: Any) -> None:
        self._connection = connection
        self._consumer = consumer
        transport = connection.transport  # this consumer's own (the main one keeps its own)
        if transport.polling_interval is not None:  # None: no pause at all, kept
            transport.polling_interval = min(transport.polling_interval, POLL_S)

    def drain_events(self, timeout: float | None = None) -> Any:
        qos = getattr(self._consumer.channel, "qos", None)
        if qos is not None and not qos.can_consume():
            timeout = FULL_WAIT_S if timeout is None else min(timeout, FULL_WAIT_S)
        return self._connection.drain_events(timeout=timeout)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._connection, name)


def _query_loop(obj: Any, connection: Any, consumer: Any, *args: Any, **kwargs: Any) -> Any:
    """Celery's blocking loop, draining through `_Prompt`."""
    return loops.synloop(obj, _Prompt(connection, consumer), consumer, *args, **kwargs)


class _QueryConsumer(Consumer):  # type: ignore[misc]
    loop = staticmethod(_query_loop)

    class Blueprint(Consumer.Blueprint):  # type: ignore[misc]
        default_steps = [*Consumer.Blueprint.default_steps, f"{__name__}:_OnlyQueries"]


class QueryController(WorkController):  # type: ignore[misc]
    """The in-process worker of the query queue."""

    inner = True  # not the process's worker (workers.metrics counts the main pool's slots)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.ready = threading.Event()
        super().__init__(*args, **kwargs)

    def on_consumer_ready(self, consumer: Any) -> None:
        self.ready.set()

    def _send_worker_shutdown(self) -> None:
        """The process's clients stay open: the main pool may still be finishing a commit."""


class QueryLane:
    """Starts and stops the query controller with the main worker (see QuerySlots)."""

    def __init__(self, worker: Any, concurrency: int) -> None:
        self._worker = worker
        self._concurrency = concurrency
        self._controller: QueryController | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        w = self._worker
        self._controller = QueryController(
            app=w.app,
            hostname=f"query-{w.hostname}",
            concurrency=self._concurrency,
            pool="threads",
            consumer_cls=_QueryConsumer,
            use_eventloop=False,  # the hub is per process; the blocking loop needs none
            loglevel=w.loglevel,
            without_heartbeat=True,
            without_mingle=True,
            without_gossip=True,
        )
        self._thread = threading.Thread(
            target=self._controller.start, name="query-slots", daemon=True
        )
        self._thread.start()
        if not self._controller.ready.wait(60):
            raise RuntimeError("the query consumer did not start")
        metrics.WORKER_SLOTS.labels(Queue.QUERY.value).set(self._concurrency)
        _lane_on.set()
        log.info("questions on their own consumer, %d threads", self._concurrency)

    def stop(self) -> None:
        """After the main consumer stopped: its shutdown flag (process-wide) stops this loop
        too, and the questions in flight finish."""
        _lane_on.clear()
        if self._thread is None:
            return
        if worker_state.should_stop is None and worker_state.should_terminate is None:
            worker_state.should_stop = 0  # stopped in code, not by a signal
        self._thread.join(30)
        self._thread = None

    def terminate(self) -> None:
        self.stop()


class QuerySlots(bootsteps.StartStopStep):  # type: ignore[misc]
    """The worker's step: on where `query` is consumed beside other queues."""

    label = "query slots"
    requires = ("celery.worker.components:Pool",)

    def include_if(self, w: Any) -> bool:
        if isinstance(w, QueryController):
            return False
        broker = runtime.settings().broker
        consumed = set(w.app.amqp.queues.consume_from)
        pool = w.pool_cls
        forks = isinstance(pool, type) and issubclass(pool, PreforkPool)
        return bool(
            broker.url
            and broker.query_concurrency > 0
            and not forks
            and Queue.QUERY.value in consumed
            and len(consumed) > 1
        )

    def create(self, w: Any) -> QueryLane:
        w.app.amqp.queues.deselect(Queue.QUERY.value)  # before the main consumer starts
        return QueryLane(w, runtime.settings().broker.query_concurrency)
