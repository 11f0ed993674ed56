"""A question's model calls wait for budget no longer than its caller (`reply_by`) and none
starts once the caller is gone; what a question short of budget raises is of kind
`unavailable` (a 503 with Retry-After), not a 400."""

from __future__ import annotations

import pytest

from common.errors import error_kind
from common.llm.budget import Gate, ModelBusy, deadline_scope, shortage
from common.llm.transport import ChatRequest
from common.store.coordination.budgets import Limits, LocalBudgets
from tests.helpers.doubles import Clock

T0 = 1_000_000.0


def _request() -> ChatRequest:
    return ChatRequest("intent", [{"role": "user", "content": "x" * 40}], {}, "a", 100)


def _gate(clock: Clock) -> Gate:
    return Gate(LocalBudgets(), "e", Limits(rpm=2, period_s=60), 5, 60, 1.0, clock, clock.sleep)


def test_a_question_waits_for_budget_within_its_callers_deadline() -> None:
    clock = Clock(T0)
    gate = _gate(clock)  # one call every 30 s
    gate.admit(_request())
    with deadline_scope(T0 + 40):
        assert gate.admit(_request()).waited_s == pytest.approx(30)
    assert clock.slept == [pytest.approx(30)]


def test_a_question_whose_wait_outlasts_its_caller_makes_no_call() -> None:
    clock = Clock(T0)
    gate = _gate(clock)
    gate.admit(_request())
    with deadline_scope(T0 + 10), pytest.raises(ModelBusy, match="caller stopped waiting"):
        gate.admit(_request())  # the budget is back at +30: past the caller
    assert clock.slept == []  # it did not wait for a reply nobody reads


def test_no_call_starts_once_the_caller_is_gone() -> None:
    clock = Clock(T0)
    with deadline_scope(T0 - 1), pytest.raises(ModelBusy):
        _gate(clock).admit(_request())  # the budget would allow it
    with deadline_scope(None):
        _gate(clock).admit(_request())  # no deadline: as before


def test_a_question_short_of_budget_is_unavailable_not_an_error() -> None:
    exc = shortage("e", 3.0)  # outside a task: a question
    assert isinstance(exc, ModelBusy)
    assert error_kind(exc) == "unavailable"
