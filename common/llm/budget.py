"""How a model call waits for its endpoint's budget: backpressure, never a failure.

A call first takes its place in the endpoint's budget (common/store/coordination/budgets.py:
requests and tokens per period, calls in flight), reserving its estimated tokens, and settles
them with the real usage when it ends. A call that would exceed the budget waits inside the
task, a short while (`llm.budget_wait_s`); if the budget is still short the call raises
`BudgetShort`, and the task is re-queued with a countdown (workers.tasks.policy), its job
showing `waiting for model budget`. Once one of a task's calls went through, its later calls
wait longer (up to half the soft time limit in all), so a batch under way is not thrown away
and begun again. A 429 from the server holds every process off the endpoint.

Two roles on one server and model share one budget: the endpoint is its base URL and model.
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from common.errors import Unavailable
from common.llm.transport import ChatRequest, LLMError
from common.settings import LLMEndpoint, LLMSettings
from common.store.coordination.budgets import Limits, ModelBudgets

WAITING = "waiting for model budget"
OPENAI_URL = "https://api.openai.com/v1"
# Calls are paced 1% under the budget: the (N+1)th call of a window lands 1% of a period
# after the Nth is allowed, so the network's jitter never shows the server N+1 in a window.
PACING_MARGIN = 1.01


class BudgetShort(Exception):  # noqa: N818 - a signal to re-queue, not an error
    """The endpoint's budget stays short: re-queue the task in `retry_in` seconds (math.inf:
    a zero budget). Never a failure, so deliberately not an AtomMemError."""

    def __init__(self, endpoint: str, retry_in: float) -> None:
        super().__init__(f"{WAITING}: {endpoint}")
        self.endpoint = endpoint
        self.retry_in = retry_in


class ModelBusy(LLMError, Unavailable):
    """Outside a task (a question): the endpoint allows no call now (its budget, its 429s, or
    its caller's deadline came first). Of kind `unavailable`: HTTP 503 with Retry-After."""


def shortage(endpoint: str, retry_in: float) -> Exception:
    """What a call that cannot go raises: BudgetShort inside a task (it is re-queued); outside
    one (a question, which no queue brings back; a benchmark) a ModelBusy that says why."""
    if _TASK.get() is not None:
        return BudgetShort(endpoint, retry_in)
    return ModelBusy(f"{WAITING}: {endpoint} allows no call now (a zero budget, or 429s)")


UNAVAILABLE = "model unavailable"


class ModelUnavailable(BudgetShort):
    """Every try of a call failed transiently (5xx, timeout, connection) and the endpoint has
    been failing for less than `llm.outage_s`: the task is re-queued in `retry_in` seconds
    like one short of budget (its calls that went through are parked), not failed."""

    def __init__(
        self, endpoint: str, retry_in: float, down_s: float, error: str, since: float
    ) -> None:
        super().__init__(endpoint, retry_in)
        self.since = since  # when this task's calls began failing: carried to its next run
        self.args = (f"{UNAVAILABLE}: {endpoint} failing for {down_s:.0f} s ({error})",)


def unavailable(
    endpoint: str, retry_in: float, down_s: float, error: str, since: float
) -> Exception:
    """What a call whose endpoint keeps failing raises: ModelUnavailable inside a task (it
    is re-queued, `since` its calls' first failure); outside one a ModelBusy that says why."""
    if _TASK.get() is not None:
        return ModelUnavailable(endpoint, retry_in, down_s, error, since)
    return ModelBusy(f"{UNAVAILABLE}: {endpoint} failing for {down_s:.0f} s ({error})")


def endpoint_id(endpoint: LLMEndpoint) -> str:
    """The budget's key: `model@base_url`, shared by every role on that server and model."""
    return f"{endpoint.model}@{endpoint.base_url or OPENAI_URL}"


def limits_of(endpoint: LLMEndpoint, llm: LLMSettings) -> Limits:
    return Limits(
        rpm=endpoint.rpm,
        tpm=endpoint.tpm,
        max_concurrent=endpoint.max_concurrent,
        period_s=llm.budget_period_s * PACING_MARGIN,
        lease_s=llm.timeout_s + 10.0,  # a call ends within its timeout: a lease past it is dead
    )


def estimate(request: ChatRequest) -> int:
    """The tokens a call reserves: its prompt's characters / 4, plus the answer's maximum."""
    chars = sum(len(m.get("content", "")) for m in request.messages)
    return chars // 4 + request.max_tokens


@dataclass
class _Patience:
    """One task's waiting so far: after its first call went through it waits longer."""

    started: bool = False
    waited_s: float = 0.0
    failing_since: float | None = None  # its calls' first failure, on an earlier run


_TASK: ContextVar[_Patience | None] = ContextVar("atommem_budget_task", default=None)
# When a question's caller stops waiting (epoch seconds): no call waits past it or starts after.
_DEADLINE: ContextVar[float | None] = ContextVar("atommem_budget_deadline", default=None)


@contextmanager
def deadline_scope(deadline: float | None) -> Iterator[None]:
    """Answer one question whose caller gives up at `deadline` (None: no deadline): its calls
    wait for budget no longer than that, and none is sent once it has passed."""
    token = _DEADLINE.set(deadline)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def deadline() -> float | None:
    """When the question being answered in this context stops being waited for (None: no
    question, or no deadline)."""
    return _DEADLINE.get()


def caller_gone(endpoint: str) -> Exception:
    return ModelBusy(f"{WAITING}: {endpoint}; the question's caller stopped waiting first")


def task_failing_since() -> float | None:
    """When the running task's calls began failing transiently on an earlier run (the
    outage it was re-queued for), or None."""
    patience = _TASK.get()
    return patience.failing_since if patience is not None else None


@contextmanager
def task_scope(failing_since: float | None = None) -> Iterator[None]:
    """Run one task: its calls wait briefly until the first goes, then patiently. Outside a
    task (a benchmark's judge, a test) calls wait as long as the budget needs, short of never.
    `failing_since`: when its calls began failing, carried from the run that re-queued it
    for an outage, so the task's own failing time stays bounded by `llm.outage_s`."""
    token = _TASK.set(_Patience(failing_since=failing_since))
    try:
        yield
    finally:
        _TASK.reset(token)


@dataclass(frozen=True)
class Grant:
    """A call's place in the budget: its lease, the tokens it reserved, how long it waited."""

    lease: str
    tokens: int
    waited_s: float


class Gate:
    """One endpoint's budget as its calls see it; thread-safe (the state lives in budgets)."""

    def __init__(
        self,
        budgets: ModelBudgets,
        endpoint: str,
        limits: Limits,
        wait_s: float,
        patient_s: float,
        hold_s: float,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.endpoint = endpoint
        self.limits = limits
        self._budgets = budgets
        self._wait_s = wait_s
        self._patient_s = max(patient_s, wait_s)
        self._hold_s = hold_s
        self._clock = clock
        self._sleep = sleep

    def admit(self, request: ChatRequest) -> Grant:
        """Wait for the budget to allow this call and take its place; BudgetShort when it
        stays short past this task's patience."""
        tokens, lease = estimate(request), uuid.uuid4().hex
        patience, deadline = _TASK.get(), _DEADLINE.get()
        waited = 0.0
        while True:
            now = self._clock()
            if deadline is not None and now >= deadline:
                self._count(waited)
                raise caller_gone(self.endpoint)
            wait = self._budgets.take(self.endpoint, self.limits, tokens, lease, now)
            if wait <= 0:
                break
            if deadline is not None and now + wait >= deadline:
                self._count(waited)
                raise caller_gone(self.endpoint)
            if waited + wait > self._bound(patience):
                self._count(waited, requeues=int(patience is not None))
                raise shortage(self.endpoint, wait)
            self._sleep(wait)
            waited += wait
        if patience is not None:
            patience.started = True
            patience.waited_s += waited
        self._count(waited)
        return Grant(lease, tokens, waited)

    def _bound(self, patience: _Patience | None) -> float:
        if patience is None:
            return math.inf if not self.limits.never else 0.0
        if not patience.started:
            return self._wait_s
        return max(0.0, self._patient_s - patience.waited_s)

    def settle(self, grant: Grant, used: int | None) -> None:
        """The call ended having used `used` tokens (None: unknown, keep the reservation)."""
        refund = 0 if used is None else grant.tokens - used
        self._budgets.settle(self.endpoint, self.limits, grant.lease, refund, self._clock())
        self._budgets.count(self.endpoint, {"calls": 1, "tokens": grant.tokens - refund})

    def failing(self) -> float:
        """A call failed transiently: since when the endpoint has been failing."""
        # Failures further apart than a call's whole life belong to separate spells.
        gap = 2 * self.limits.lease_s + 60.0
        return self._budgets.failing(self.endpoint, self._clock(), gap)

    def recovered(self) -> None:
        """A call went through: the endpoint is not failing (any more)."""
        self._budgets.recovered(self.endpoint)

    def throttled(self, retry_after: float | None) -> None:
        """The server answered 429: every process holds off until its Retry-After (or the
        first backoff when it gives none)."""
        hold = retry_after if retry_after is not None else self._hold_s
        self._budgets.hold_off(self.endpoint, self._clock() + hold)
        self._budgets.count(self.endpoint, {"throttled": 1})

    def _count(self, waited: float, requeues: int = 0) -> None:
        counts = {"requeues": requeues}
        if waited > 0:
            counts |= {"waits": 1, "wait_ms": round(waited * 1000)}
        if any(counts.values()):
            self._budgets.count(self.endpoint, counts)
