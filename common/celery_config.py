"""The Celery configuration shared by workers and producers, built from settings."""

from __future__ import annotations

from typing import Any

from kombu.entity import Exchange
from kombu.entity import Queue as KombuQueue

from common.queues import TASK_ROUTES, Queue
from common.settings import Settings


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
        "task_send_sent_event": True,
        "worker_send_task_events": True,
        "result_expires": settings.pipeline.job_ttl_s,
        "result_extended": False,
    }
