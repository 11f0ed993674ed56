"""A lane task's turn: it keeps its step through a retry and lets it go once the step is done
or failed for good; steps of vanished tasks it put back get new tasks; with the lanes off or
no Redis, work is sent straight on."""

from __future__ import annotations

import json
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import pytest
import redis
from celery.exceptions import Retry

from common.models.jobs import TaskPayload
from common.queues import Queue, TaskName
from common.settings import BrokerSettings, FairSettings, Settings
from common.store.coordination.fair import Claim, Turn
from workers import runtime
from workers.celery_app import app
from workers.tasks import fair

STEP = json.dumps({"task": TaskName.DRAIN.value, "payload": {"tenant": "t", "space": "s"}})


class Lanes:
    def __init__(self, turn: Turn) -> None:
        self.turn = turn
        self.released: list[str] = []
        self.offered: list[tuple[str, str, Sequence[tuple[str, str]]]] = []

    def offer(self, lane: str, tenant: str, items: Sequence[tuple[str, str]]) -> int:
        self.offered.append((lane, tenant, items))
        return len(items)

    def claim(self, lane: str, task_id: str, now: float, stale_before: float) -> Turn:
        return self.turn

    def release(self, lane: str, task_id: str) -> None:
        self.released.append(task_id)

    def waiting(self, lane: str, tenant: str) -> int:
        return 0


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, dict[str, Any]]]:
    calls: list[tuple[str, dict[str, Any]]] = []
    monkeypatch.setattr(app, "send_task", lambda name, **kw: calls.append((name, kw)))
    return calls


def use(monkeypatch: pytest.MonkeyPatch, lanes: Lanes | None, enabled: bool = True) -> None:
    settings = Settings(broker=BrokerSettings(url="redis://x"), fair=FairSettings(enabled=enabled))
    monkeypatch.setattr(runtime, "settings", lambda: settings)
    monkeypatch.setattr(runtime, "coordination", lambda: SimpleNamespace(fair=lanes))


TASK = SimpleNamespace(request=SimpleNamespace(id="task-1"))


def test_a_finished_step_is_let_go(monkeypatch: pytest.MonkeyPatch, sent: list[Any]) -> None:
    lanes = Lanes(Turn(Claim("t", "drain:s", STEP)))
    use(monkeypatch, lanes)
    with fair.turn(TASK, Queue.MEMORY) as step:
        assert step == (TaskName.DRAIN, {"tenant": "t", "space": "s"})
    assert lanes.released == ["task-1"]
    assert sent == []


@pytest.mark.parametrize("error", [Retry(), redis.ConnectionError("down")])
def test_a_step_is_kept_for_the_retry(
    monkeypatch: pytest.MonkeyPatch, sent: list[Any], error: Exception
) -> None:
    lanes = Lanes(Turn(Claim("t", "drain:s", STEP)))
    use(monkeypatch, lanes)
    with pytest.raises(type(error)), fair.turn(TASK, Queue.MEMORY):
        raise error
    assert lanes.released == []


def test_a_step_failed_for_good_is_let_go(monkeypatch: pytest.MonkeyPatch, sent: list[Any]) -> None:
    lanes = Lanes(Turn(Claim("t", "drain:s", STEP)))
    use(monkeypatch, lanes)
    with pytest.raises(ValueError), fair.turn(TASK, Queue.MEMORY):
        raise ValueError("bad")
    assert lanes.released == ["task-1"]


def test_steps_put_back_get_new_tasks_at_the_lane_priority(
    monkeypatch: pytest.MonkeyPatch, sent: list[tuple[str, dict[str, Any]]]
) -> None:
    use(monkeypatch, Lanes(Turn(None, requeued=2)))
    with fair.turn(TASK, Queue.EXTRACT) as step:
        assert step is None
    assert [name for name, _ in sent] == [TaskName.EXTRACT_NEXT.value] * 2
    assert all(kw["priority"] == fair.LANE_PRIORITY for _, kw in sent)


def test_every_offer_sends_its_task_even_when_the_step_already_waits(
    monkeypatch: pytest.MonkeyPatch, sent: list[tuple[str, dict[str, Any]]]
) -> None:
    lanes = Lanes(Turn(None))
    lanes.offer = lambda lane, tenant, items: 0  # type: ignore[method-assign]
    use(monkeypatch, lanes)
    payload = TaskPayload(enqueued_at=1.0)
    fair.offer(lanes, Queue.MEMORY, "t", [fair.Step("drain:s", TaskName.DRAIN, payload)])
    assert [name for name, _ in sent] == [TaskName.MEMORY_NEXT.value]


@pytest.mark.parametrize("enabled,lanes", [(False, Lanes(Turn(None))), (True, None)])
def test_no_lanes_when_off_or_without_redis(
    monkeypatch: pytest.MonkeyPatch, enabled: bool, lanes: Lanes | None
) -> None:
    use(monkeypatch, lanes, enabled)
    assert fair.lanes() is None
