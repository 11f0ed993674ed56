"""A drain that finds its space locked sends one delayed drain, in case the holder died: one
per space and process at a time, and always one once the last has had time to run."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from workers.tasks import policy


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> tuple[list[tuple[str, str, float]], list[float]]:
    """The delayed drains sent, and the clock the retries read."""
    drains: list[tuple[str, str, float]] = []
    clock = [100.0]
    monkeypatch.setattr(
        policy,
        "send_drain",
        lambda tenant, space, countdown: drains.append((tenant, space, countdown)),
    )
    monkeypatch.setattr(policy, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    return drains, clock


def test_drains_meeting_a_busy_space_send_one_retry_between_them(
    sent: tuple[list[tuple[str, str, float]], list[float]],
) -> None:
    drains, clock = sent
    retries = policy._BusyRetries()
    for _ in range(50):  # a burst of drains meets the lock
        retries.send("t", "s", 2.0)
    retries.send("t", "other", 2.0)  # another space has its own
    assert drains == [("t", "s", 2.0), ("t", "other", 2.0)]
    clock[0] += 0.9
    retries.send("t", "s", 2.0)
    assert len(drains) == 2


def test_the_retry_that_runs_may_send_the_next(
    sent: tuple[list[tuple[str, str, float]], list[float]],
) -> None:
    drains, clock = sent
    retries = policy._BusyRetries()
    retries.send("t", "s", 2.0)
    clock[0] += 2.0  # the delayed drain runs when due (never earlier) and meets the lock again
    retries.send("t", "s", 2.0)
    assert drains == [("t", "s", 2.0), ("t", "s", 2.0)]
