"""The query consumer's loop (workers.query_slots): while every slot holds a question it
drains the broker with a short wait, so a question sent meanwhile is taken as soon as a slot
frees, otherwise it waits on the queue as Celery's loop does; its transport pauses briefly
after a read that found nothing."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from workers.query_slots import FULL_WAIT_S, POLL_S, _Prompt


class _Connection:
    def __init__(self) -> None:
        self.timeouts: list[float | None] = []
        self.transport = SimpleNamespace(polling_interval=0.01)
        self.hostname = "redis"

    def drain_events(self, timeout: float | None = None) -> None:
        self.timeouts.append(timeout)


def _consumer(free: bool | None) -> Any:
    qos = None if free is None else SimpleNamespace(can_consume=lambda: free)
    return SimpleNamespace(channel=SimpleNamespace(qos=qos))


@pytest.mark.parametrize(
    ("free", "expected"),
    [(True, 2.0), (False, FULL_WAIT_S), (None, 2.0)],
    ids=["a slot free", "every slot busy", "a transport without prefetch credit"],
)
def test_the_loop_waits_briefly_only_while_every_slot_is_busy(
    free: bool | None, expected: float
) -> None:
    connection = _Connection()
    prompt = _Prompt(connection, _consumer(free))
    prompt.drain_events(timeout=2.0)
    assert connection.timeouts == [expected]
    assert prompt.hostname == "redis"  # everything else is the connection's


def test_the_consumers_transport_reads_again_soon_after_finding_nothing() -> None:
    connection = _Connection()
    _Prompt(connection, _consumer(True))
    assert connection.transport.polling_interval == POLL_S
