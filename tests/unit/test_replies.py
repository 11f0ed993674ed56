"""A reply task does no work and stores nothing once its caller has given up (`reply_by`)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from celery import Celery, Task
from celery.exceptions import Ignore

from common.queues import TaskName
from workers.celery_app import app as atommem
from workers.replies import MARGIN_S, ReplyTask, deadline
from workers.tasks import admin, pipeline, query  # noqa: F401 - registers the tasks
from workers.tasks.policy import JobTask

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


def test_each_task_has_the_base_for_what_it_is() -> None:
    """Steps of a job must finish (JobTask); queries, reads and the ping answer a waiting
    caller (ReplyTask, and no JobTask: a question is never queued again while its caller
    waits); an admin write is both. Only replies keep their results."""
    answers = {TaskName.SEARCH, TaskName.ASK, TaskName.READ, TaskName.PING}
    for name in TaskName:
        registered = atommem.tasks[name.value]
        assert isinstance(registered, JobTask) == (name not in answers), name
        replies = name in answers or name is TaskName.ADMIN
        assert isinstance(registered, ReplyTask) == replies, name
        assert registered.ignore_result == (not replies), name
