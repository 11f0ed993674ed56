"""A reply task does no work and stores nothing once its caller has given up (`reply_by`)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from celery import Celery, Task
from celery.exceptions import Ignore

from workers.replies import MARGIN_S, ReplyTask, deadline

app = Celery("replies-test")
RAN: list[str] = []


@app.task(bind=True, base=ReplyTask)
def echo(self: Task, payload: dict[str, Any]) -> dict[str, Any]:
    RAN.append(payload["text"])
    if payload.get("slow"):
        time.sleep(2 * MARGIN_S)
    return {"text": payload["text"]}


def test_a_reply_within_its_callers_patience_is_returned() -> None:
    payload = {"text": "memory", "reply_by": time.time() + 60}
    assert echo(payload=payload) == {"text": "memory"}
    assert echo(payload={"text": "memory"}) == {"text": "memory"}  # nobody set a deadline


def test_a_task_taken_up_after_its_caller_gave_up_does_nothing() -> None:
    RAN.clear()
    with pytest.raises(Ignore):
        echo(payload={"text": "memory", "reply_by": time.time() - 5})
    assert RAN == []


def test_a_reply_finished_after_its_callers_deadline_is_dropped() -> None:
    RAN.clear()
    with pytest.raises(Ignore):
        echo(payload={"text": "memory", "slow": True, "reply_by": time.time() + 1.5 * MARGIN_S})
    assert RAN == ["memory"]


def test_deadline_reads_the_payload() -> None:
    assert deadline({"payload": {"reply_by": 12.5}}) == 12.5
    assert deadline({"payload": {}}) is None
