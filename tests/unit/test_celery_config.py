"""The shared Celery configuration: task events only where a monitor can read them, and task
messages that carry their redacted argument reprs from the start."""

from __future__ import annotations

from common.celery_config import celery_config, redacted_reprs
from common.settings import BrokerSettings, Settings


def test_task_events_are_sent_on_a_broker_and_not_into_the_embedded_in_memory_one() -> None:
    assert celery_config(Settings())["worker_send_task_events"] is False
    on_redis = Settings(broker=BrokerSettings(url="redis://redis.internal:6379/0"))
    assert celery_config(on_redis)["worker_send_task_events"] is True


def test_a_message_is_sent_with_ids_only_in_its_argument_reprs() -> None:
    payload = {"tenant": "acme", "space": "home", "question": "what is Ann's passport number?"}
    reprs = redacted_reprs({"payload": payload})
    assert reprs["argsrepr"] == "()"
    assert "home" in reprs["kwargsrepr"] and "passport" not in reprs["kwargsrepr"]
