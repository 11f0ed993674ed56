"""The Celery configuration shared by workers and producers, built from settings."""

from __future__ import annotations

from typing import Any

from celery import Celery
from celery.signals import before_task_publish
from kombu.entity import Exchange
from kombu.entity import Queue as KombuQueue

from common.queues import TASK_ROUTES, Queue
from common.settings import Settings

# What a task message may name in its headers (and so in Flower and the workers' task events):
# ids, never a payload's turns, questions or drafts, which must not outlive an erasure there.
_NAMED = ("tenant", "space", "job_id", "chunk", "chunks", "what", "op")


def payload_repr(kwargs: Any) -> str:
    """A task's keyword arguments as its message headers show them: ids only."""
    payload = kwargs.get("payload") if isinstance(kwargs, dict) else None
    if not isinstance(payload, dict):
        return "{}"
    shown = {k: payload[k] for k in _NAMED if payload.get(k) is not None}
    session = payload.get("session")
    if isinstance(session, dict) and "session_id" in session:
        shown["session_id"] = session["session_id"]
    return repr({"payload": shown})


def send_payload(app: Celery, name: str, payload: dict[str, Any], **options: Any) -> Any:
    """Send task `name` with `payload`, its message's argument reprs redacted up front."""
    kwargs = {"payload": payload}
    return app.send_task(name, kwargs=kwargs, **redacted_reprs(kwargs), **options)


def redacted_reprs(kwargs: dict[str, Any]) -> dict[str, str]:
    """`send_task` options giving a message its redacted argument reprs up front: Celery
    then skips its own repr of the arguments (a question's payload: 13 saferepr calls), which
    `_redact_headers` would only replace."""
    return {"argsrepr": "()", "kwargsrepr": payload_repr(kwargs)}


@before_task_publish.connect(weak=False)
def _redact_headers(headers: dict[str, Any] | None = None, body: Any = None, **_: Any) -> None:
    """Every message any of our apps publishes (producer, API, a worker's next step or retry)
    carries the redacted form in `argsrepr`/`kwargsrepr`."""
    if headers is None or "kwargsrepr" not in headers:
        return
    kwargs = body[1] if isinstance(body, (list, tuple)) and len(body) > 1 else {}
    headers["argsrepr"] = "()"
    headers["kwargsrepr"] = payload_repr(kwargs)


def celery_config(settings: Settings) -> dict[str, Any]:
    broker = settings.broker
    embedded = broker.url is None
    transport: dict[str, Any] = {"polling_interval": broker.polling_interval}
    if not embedded:
        transport |= {
            "visibility_timeout": broker.visibility_timeout,
            "unacked_restore_interval": broker.unacked_restore_interval,
        }
    return {
        "broker_url": "memory://" if embedded else broker.url,
        "result_backend": "cache+memory://" if embedded else (broker.result_url or broker.url),
        "broker_transport_options": transport,
        "result_backend_transport_options": {"visibility_timeout": broker.visibility_timeout},
        "broker_connection_retry_on_startup": True,
        "task_queues": [KombuQueue(q.value, Exchange(q.value), routing_key=q.value) for q in Queue],
        "task_default_queue": Queue.INGEST.value,
        "task_routes": TASK_ROUTES,
        "task_create_missing_queues": False,
        "task_serializer": "json",
        "result_serializer": "json",
        "accept_content": ["json"],
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "task_soft_time_limit": broker.soft_time_limit,
        "task_time_limit": broker.time_limit,
        "worker_prefetch_multiplier": 1,
        # A task-sent event carries the arguments' repr before any signal can redact it;
        # Flower still sees every task from its task-received event on.
        "task_send_sent_event": False,
        # Task events are for monitors on a broker (Flower); nothing outside the process can
        # read the embedded mode's in-memory one, where each task sent three for nobody.
        "worker_send_task_events": not embedded,
        "result_expires": settings.pipeline.job_ttl_s,
        "result_extended": False,
    }
