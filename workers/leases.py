"""Recovery that does not wait on the broker's visibility timeout: a running task marks its
job alive, and a sweep in every worker sends open jobs that stopped making progress again.

A job is taken for stalled when nothing marked it alive for `broker.job_stale_s`, its space
is not locked (a live holder renews the lock), its session is the head of its space's
sequence (a later one only waits its turn) and every pipeline queue has moved past it:
the oldest message waiting in each was queued after the job last progressed, so a message
the job needs is in no queue (lost with a killed worker, or with a Redis restart). Sending a
job again is always safe (accept is idempotent), so a wrong guess costs a little work, never
memory; each resend without progress doubles the wait for the next. (With fair lanes a
step can wait in its tenant's lane after the queue moved past it: such a job may be sent
again, its step is not queued twice, and the surplus lane task finds nothing to do.)
"""

from __future__ import annotations

import base64
import json
import logging
import threading
import time
from collections.abc import Iterable
from typing import Any

import redis
from celery import Celery
from celery.signals import worker_ready, worker_shutdown

from common.models.jobs import Job
from common.producer import Producer
from common.queues import Queue
from common.settings import Settings
from common.store import keys
from common.store.coordination.liveness import JOB_LIVENESS
from common.store.coordination.roles import Coordination
from workers import runtime
from workers.celery_app import app

log = logging.getLogger(__name__)

PIPELINE_QUEUES = tuple(q.value for q in Queue if q is not Queue.QUERY)
# kombu's Redis transport keeps one list per priority step: "<queue>", "<queue>\x06\x163", ...
# The fair lanes' tasks wait in the priority-9 lists; they are interchangeable and name no
# job, so a backlog of them says nothing about whether a job's message is still queued.
_PRIORITY_LISTS = ("", "\x06\x163", "\x06\x166")


def start_job_liveness() -> None:
    """Turn on the marking of jobs in progress in this process (once; a no-op without a
    broker: one embedded process has nothing to recover from)."""
    cfg = runtime.settings().broker
    if cfg.url is not None and not JOB_LIVENESS.configured:
        JOB_LIVENESS.configure(
            lambda tenant, ids: runtime.coordination().jobs.touch(tenant, ids),
            cfg.job_stale_s / 3,
        )


def enqueued_at(raw: str | bytes) -> float:
    """When a queued task message was sent (its payload's stamp); 0.0 when unreadable, so an
    unknown message counts as old and nothing is taken for lost behind it."""
    try:
        message = json.loads(raw)
        body: Any = message["body"]
        if message.get("properties", {}).get("body_encoding") == "base64":
            body = base64.b64decode(body)
        _args, kwargs, _embed = json.loads(body)
        return float(kwargs["payload"]["enqueued_at"])
    except (ValueError, KeyError, TypeError, IndexError):
        return 0.0


def oldest_waiting(client: redis.Redis, queues: Iterable[str]) -> float | None:
    """When the oldest message still waiting in these queues was sent; None if all are empty.
    kombu pushes on the left and consumes from the right, so the oldest is the last."""
    oldest: float | None = None
    for queue in queues:
        for suffix in _PRIORITY_LISTS:
            raw = client.lindex(queue + suffix, -1)
            if raw is not None:
                sent = enqueued_at(raw)
                oldest = sent if oldest is None else min(oldest, sent)
    return oldest


class Sweeper:
    """Every `sweep_interval_s`, in one worker at a time (a Redis lock per round), sends the
    stalled open jobs again."""

    def __init__(self, settings: Settings, app: Celery, name: str) -> None:
        assert settings.broker.url, "the sweep is for runs with a broker"
        self._cfg = settings.broker
        self._name = name
        self._coord = Coordination.for_settings(settings)
        self._redis = redis.Redis.from_url(settings.broker.url)
        self._client = Producer(app, self._coord.jobs, self._coord.sequence)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="atommem-sweep", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
        self._coord.close()
        self._redis.close()

    def _run(self) -> None:
        while not self._stop.wait(self._cfg.sweep_interval_s):
            try:
                self.sweep()
            except Exception as exc:  # Redis briefly away: the next round tries again
                log.warning("sweep failed: %s", exc)

    def sweep(self) -> list[Job]:
        """One round: the jobs sent again (none when another worker has this round)."""
        round_ms = max(1, int(self._cfg.sweep_interval_s * 900))
        if not self._redis.set(keys.SWEEP, self._name, nx=True, px=round_ms):
            return []
        stalled = self._coord.jobs.stalled(time.time() - self._cfg.job_stale_s)
        if not stalled:
            return []
        front = oldest_waiting(self._redis, PIPELINE_QUEUES)
        due = [
            job
            for job, progressed in stalled
            if (front is None or progressed + self._cfg.clock_skew_s < front)
            and self._blocks_its_space(job)
            and not self._coord.locks.held(job.tenant, job.space)
        ]
        sent = self._client.resend(due, backoff_s=self._cfg.job_stale_s)
        for job in sent:
            log.warning(
                "sent stalled job %s (%s/%s, %s) again", job.job_id, job.space, job.session_id,
                job.state,
            )  # fmt: skip
        return sent

    def _blocks_its_space(self, job: Job) -> bool:
        """A job worth sending again: its session is the head of its space's sequence, or in
        no sequence at all (lost with a Redis restart). A later session only waits its turn;
        once it is the head, a round finds it if it is stuck."""
        waiting = self._coord.sequence.pending(job.tenant, job.space)
        return not waiting or job.session_id == waiting[0] or job.session_id not in waiting


_SWEEPER: Sweeper | None = None


@worker_ready.connect
def _start_sweep(sender: Any = None, **_: Any) -> None:
    global _SWEEPER
    settings = runtime.settings()
    if settings.broker.url is None or _SWEEPER is not None:
        return
    _SWEEPER = Sweeper(settings, app, str(getattr(sender, "hostname", "worker")))
    _SWEEPER.start()


@worker_shutdown.connect
def _stop_sweep(**_: Any) -> None:
    global _SWEEPER
    if _SWEEPER is not None:
        _SWEEPER.stop()
        _SWEEPER = None
