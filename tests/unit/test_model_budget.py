"""Model budgets: the bucket arithmetic on both implementations (in-process and Redis, the
latter skipped when Redis is not running), the gate's waiting, the transport's settling, an
endpoint's failing spell, and the calls a re-queued task keeps and replays."""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
import redis
from pydantic import SecretStr

from common.llm import usage
from common.llm.budget import (
    BudgetShort,
    Gate,
    ModelBusy,
    ModelUnavailable,
    deadline_scope,
    endpoint_id,
    estimate,
    task_scope,
)
from common.llm.model_backend import KeptCalls, ModelBackend, _people, call_digest, keeping
from common.llm.openai_compat import OpenAITransport
from common.llm.transport import ChatRequest, Completion, LLMError
from common.models.jobs import Job
from common.settings import LLMEndpoint, LLMSettings, MemorySettings
from common.store import keys
from common.store.coordination.budgets import (
    Limits,
    LocalBudgets,
    ModelBudgets,
    RedisBudgets,
    model_counters,
)
from common.store.coordination.chunks import RedisChunks
from common.store.coordination.jobs import RedisJobs
from tests.helpers.doubles import Clock
from tests.helpers.fake_llm_server import completion, rate_limited, serve
from tests.helpers.redis import flushed, shared_url

REDIS_URL = shared_url(__name__)
T0 = 1_000_000.0


@pytest.fixture(params=["local", "redis"])
def budgets(request: pytest.FixtureRequest) -> Iterator[ModelBudgets]:
    if request.param == "local":
        yield LocalBudgets()
        return
    with flushed(REDIS_URL, decode_responses=True) as client:
        yield RedisBudgets(client)


@pytest.fixture
def endpoint() -> str:
    return f"m@http://test/{uuid.uuid4().hex[:8]}"


def take(b: ModelBudgets, e: str, limits: Limits, at: float, tokens: int = 0) -> float:
    return b.take(e, limits, tokens, uuid.uuid4().hex, T0 + at)


def test_requests_are_paced_at_the_budget_rate(budgets: ModelBudgets, endpoint: str) -> None:
    limits = Limits(rpm=6, period_s=60)  # one request every 10 s
    assert take(budgets, endpoint, limits, 0) == 0
    assert take(budgets, endpoint, limits, 0) == pytest.approx(10)
    assert take(budgets, endpoint, limits, 4) == pytest.approx(6)
    assert take(budgets, endpoint, limits, 10) == 0
    # Idle time is not saved up: after a minute of nothing, one goes, the next waits.
    assert take(budgets, endpoint, limits, 80) == 0
    assert take(budgets, endpoint, limits, 80) == pytest.approx(10)


def test_tokens_reserve_the_estimate_and_settle_with_the_real_usage(
    budgets: ModelBudgets, endpoint: str
) -> None:
    limits = Limits(tpm=600, period_s=60)  # 10 tokens a second
    lease = "a"
    assert budgets.take(endpoint, limits, 300, lease, T0) == 0
    assert take(budgets, endpoint, limits, 0, 10) == pytest.approx(30)  # 300 in debt
    budgets.settle(endpoint, limits, lease, 200, T0 + 5)  # used 100 of 300; 50 refilled
    assert take(budgets, endpoint, limits, 5, 10) == pytest.approx(5)  # 50 left in debt
    budgets.settle(endpoint, limits, "b", -40, T0 + 5)  # another call used 40 more than held
    assert take(budgets, endpoint, limits, 5, 10) == pytest.approx(9)
    assert take(budgets, endpoint, limits, 14, 10) == 0


def test_a_settled_refund_never_saves_up(budgets: ModelBudgets, endpoint: str) -> None:
    limits = Limits(tpm=600, period_s=60)
    assert budgets.take(endpoint, limits, 50, "a", T0) == 0
    budgets.settle(endpoint, limits, "a", 500, T0 + 1)  # more back than was owed
    assert take(budgets, endpoint, limits, 1, 100) == 0
    assert take(budgets, endpoint, limits, 1, 10) == pytest.approx(10)


def test_the_concurrency_cap_and_a_lease_that_lapses(budgets: ModelBudgets, endpoint: str) -> None:
    limits = Limits(max_concurrent=2, lease_s=30)
    assert budgets.take(endpoint, limits, 0, "a", T0) == 0
    assert budgets.take(endpoint, limits, 0, "b", T0 + 1) == 0
    assert 0 < budgets.take(endpoint, limits, 0, "c", T0 + 2) <= 0.1  # full: look again soon
    budgets.settle(endpoint, limits, "a", 0, T0 + 3)
    assert budgets.take(endpoint, limits, 0, "c", T0 + 3) == 0
    assert budgets.take(endpoint, limits, 0, "d", T0 + 4) > 0
    # "b"'s process died: its lease lapses 30 s after it started, and its place is free.
    assert budgets.take(endpoint, limits, 0, "d", T0 + 31.5) == 0


def test_a_zero_budget_lets_nothing_through(budgets: ModelBudgets, endpoint: str) -> None:
    for limits in (Limits(rpm=0), Limits(tpm=0), Limits(max_concurrent=0)):
        assert take(budgets, endpoint, limits, 0) == math.inf


def test_a_429_holds_every_caller_off_until_its_retry_after(
    budgets: ModelBudgets, endpoint: str
) -> None:
    unlimited = Limits()
    assert take(budgets, endpoint, unlimited, 0) == 0
    budgets.hold_off(endpoint, T0 + 7)
    budgets.hold_off(endpoint, T0 + 3)  # an earlier hold never shortens a later one
    assert take(budgets, endpoint, unlimited, 1) == pytest.approx(6)
    assert take(budgets, endpoint, unlimited, 7) == 0


def test_counters_add_up_per_endpoint(budgets: ModelBudgets, endpoint: str) -> None:
    budgets.count(endpoint, {"calls": 2, "tokens": 30})
    budgets.count(endpoint, {"calls": 1, "throttled": 1, "waits": 1, "wait_ms": 250})
    got = budgets.counters()[endpoint]
    assert got == {
        "calls": 3, "tokens": 30, "throttled": 1, "waits": 1, "wait_ms": 250, "requeues": 0
    }  # fmt: skip
    if isinstance(budgets, RedisBudgets):
        client = redis.Redis.from_url(REDIS_URL, decode_responses=True)
        assert model_counters(client)[endpoint] == got
        assert client.sismember(keys.MODEL_ENDPOINTS, endpoint)
        client.close()


# --- the gate ----------------------------------------------------------------------------


def _request(chars: int = 40, max_tokens: int = 100) -> ChatRequest:
    return ChatRequest("extract", [{"role": "user", "content": "x" * chars}], {}, "a", max_tokens)


def _gate(budgets: ModelBudgets, limits: Limits, clock: Clock, wait_s: float = 5) -> Gate:
    return Gate(budgets, "e", limits, wait_s, 60, 1.0, clock, clock.sleep)


def test_a_call_estimates_its_prompt_over_four_plus_its_answer() -> None:
    assert estimate(_request(chars=400, max_tokens=768)) == 100 + 768


def test_a_task_waits_briefly_then_goes_back_to_its_queue() -> None:
    clock, budgets = Clock(T0), LocalBudgets()
    gate = _gate(budgets, Limits(rpm=30, period_s=60), clock)  # one every 2 s
    with task_scope():
        gate.admit(_request())
        assert gate.admit(_request()).waited_s == pytest.approx(2)  # started: patient now
    with task_scope():
        budgets.hold_off("e", clock.now + 30)
        with pytest.raises(BudgetShort) as short:
            gate.admit(_request())  # the first call of a task waits at most wait_s
    assert short.value.retry_in == pytest.approx(30)
    counts = budgets.counters()["e"]
    assert counts["waits"] == 1 and counts["wait_ms"] == 2000 and counts["requeues"] == 1


def test_a_zero_budget_never_waits_in_the_task() -> None:
    clock = Clock(T0)
    gate = _gate(LocalBudgets(), Limits(rpm=0), clock)
    with task_scope(), pytest.raises(BudgetShort) as short:
        gate.admit(_request())
    assert short.value.retry_in == math.inf
    with pytest.raises(LLMError, match="waiting for model budget: e allows no call"):
        gate.admit(_request())  # a question: no queue would bring it back
    assert clock.slept == []


def test_two_roles_on_one_server_and_model_share_one_budget() -> None:
    a = LLMEndpoint(base_url="http://gpu:8000/v1", model="qwen", rpm=10)
    b = LLMEndpoint(base_url="http://gpu:8000/v1", model="qwen", api_key=SecretStr("k"))
    assert endpoint_id(a) == endpoint_id(b) == "qwen@http://gpu:8000/v1"
    assert endpoint_id(LLMEndpoint()) == "gpt-4o-mini@https://api.openai.com/v1"


# --- through the transport -----------------------------------------------------------------


def _backend(
    base_url: str, budgets: ModelBudgets, limits: Limits, **llm: object
) -> tuple[ModelBackend, Clock]:
    settings = LLMSettings.model_validate(
        {
            "backend": "openai",
            "general": {"base_url": base_url, "model": "fake"},
            "structured_output": "json_schema",
            "backoff_s": 0,
            **llm,
        }
    )
    clock = Clock(T0)
    gate = Gate(budgets, "e", limits, 5, 60, 1.0)
    transport = OpenAITransport(settings.general, settings, "general", gate)
    backend = ModelBackend("openai", settings, MemorySettings(), transport, transport, clock.sleep)
    return backend, clock


def test_calls_settle_their_tokens_and_count_per_role() -> None:
    budgets = LocalBudgets()
    with serve(lambda _: completion('{"verdict": "CORRECT"}', prompt=40, done=10)) as server:
        backend, _ = _backend(server.base_url, budgets, Limits(tpm=1_000_000))
        with task_scope(), usage.metered() as used:
            assert backend.judge("q", "gold", "gen")
    counts = used.as_counts()
    assert counts["llm.endpoint.general.calls"] == 1
    assert counts["llm.endpoint.general.tokens"] == 50
    assert budgets.counters()["e"]["tokens"] == 50  # the real usage, not the estimate
    assert usage.Usage.from_counts(counts).as_counts() == counts


def test_a_429_holds_off_the_endpoint_and_one_that_persists_re_queues_the_task() -> None:
    budgets = LocalBudgets()
    with serve(lambda _: completion('{"verdict": "CORRECT"}')) as server:
        server.then(rate_limited(0.2))
        backend, _ = _backend(server.base_url, budgets, Limits(), max_attempts=2)
        with task_scope(), usage.metered() as used:
            assert backend.judge("q", "gold", "gen")  # the retry waited out the Retry-After
        assert used.as_counts()["llm.endpoint.general.throttled"] == 1
        server.then(*[rate_limited(0.1)] * 2)
        with task_scope(), pytest.raises(BudgetShort):
            backend.judge("q", "gold", "gen")  # every try throttled: backpressure, no failure
    assert budgets.counters()["e"]["throttled"] == 3


def test_limits_on_an_extractor_without_an_endpoint_of_its_own_are_refused() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="EXTRACTOR__MAX_CONCURRENT .* no endpoint"):
        LLMSettings(backend="openai", extractor={"max_concurrent": 16})  # type: ignore[arg-type]
    own = LLMSettings(
        backend="openai",
        extractor={"base_url": "http://x:8000/v1", "max_concurrent": 16},  # type: ignore[arg-type]
    )
    assert own.extractor.max_concurrent == 16


def test_a_failing_spell_lasts_from_its_first_failure_to_a_success(
    budgets: ModelBudgets, endpoint: str
) -> None:
    assert budgets.failing(endpoint, T0, gap_s=60) == pytest.approx(T0)
    assert budgets.failing(endpoint, T0 + 30, gap_s=60) == pytest.approx(T0)
    assert budgets.failing(endpoint, T0 + 80, gap_s=60) == pytest.approx(T0)
    budgets.recovered(endpoint)
    assert budgets.failing(endpoint, T0 + 90, gap_s=60) == pytest.approx(T0 + 90)
    # Failures further apart than the gap are separate spells (no success seen between).
    assert budgets.failing(endpoint, T0 + 200, gap_s=60) == pytest.approx(T0 + 200)


class Scripted:
    """A transport answering each request with `answer` and noting what was sent."""

    name = "test:extractor"

    def __init__(self, answer: Callable[[ChatRequest], Completion]) -> None:
        self.answer = answer
        self.sent: list[str] = []

    def complete(self, requests: list[ChatRequest]) -> list[Completion]:
        self.sent.extend(r.messages[0]["content"] for r in requests)
        return [self.answer(r) for r in requests]


def requests(n: int) -> list[ChatRequest]:
    return [
        ChatRequest("extract", [{"role": "user", "content": f"w{i}"}], {}, "answer", 16)
        for i in range(n)
    ]


def backend(transport: Scripted, **llm: float) -> ModelBackend:
    settings = LLMSettings(backoff_s=0.0, **llm)  # type: ignore[arg-type]
    return ModelBackend("openai", settings, MemorySettings(), transport, transport)


def run(b: ModelBackend, transport: Scripted, n: int) -> list[str]:
    return b._run(transport, requests(n), lambda _, done: done.text)


def test_a_re_queued_batch_replays_the_calls_that_went_through() -> None:
    def short_after_two(request: ChatRequest) -> Completion:
        if request.messages[0]["content"] in ("w0", "w1"):
            return Completion(text=request.messages[0]["content"], prompt_tokens=3)
        return Completion(error="waiting", short=5.0)

    kept: dict[str, str] = {}
    first = Scripted(short_after_two)
    with (
        task_scope(),
        keeping(KeptCalls(found={}, park=kept.__setitem__)),
        pytest.raises(BudgetShort),
    ):
        run(backend(first), first, 4)
    assert len(kept) == 2

    again = Scripted(lambda r: Completion(text=r.messages[0]["content"], prompt_tokens=3))
    with usage.metered() as used, task_scope(), keeping(KeptCalls(kept, kept.__setitem__)):
        assert run(backend(again), again, 4) == ["w0", "w1", "w2", "w3"]
    assert again.sent == ["w2", "w3"]  # the two that went through are not sent again
    counts = used.as_counts()
    assert counts["llm.extract.calls"] == 4 and counts["llm.extract.replayed"] == 2
    assert counts["llm.prompt_tokens"] == 12


def down_since(seconds: float) -> Callable[[ChatRequest], Completion]:
    since = time.time() - seconds
    return lambda _: Completion(error="HTTP 503", retryable=True, failing_since=since)


def test_an_outage_re_queues_the_task_until_it_outlasts_its_bound() -> None:
    brief = Scripted(down_since(10))
    with task_scope(), pytest.raises(ModelUnavailable) as waiting:
        run(backend(brief, outage_s=300), brief, 2)
    assert len(brief.sent) == 2 * 3  # its tries first, then back to its queue
    assert 5 <= waiting.value.retry_in <= 30
    assert "failing for 10 s" in str(waiting.value)

    long = Scripted(down_since(400))
    with task_scope(), pytest.raises(LLMError, match="400 s of outage"):
        run(backend(long, outage_s=300), long, 2)
    outside = Scripted(down_since(10))  # a question: no queue brings it back
    with pytest.raises(LLMError, match="model unavailable"):
        run(backend(outside, outage_s=300), outside, 1)


def test_without_a_failing_spell_a_call_fails_after_its_tries() -> None:
    engine = Scripted(lambda _: Completion(error="engine error", retryable=True))
    with task_scope(), pytest.raises(LLMError, match="after 3 tries: engine error"):
        run(backend(engine), engine, 1)


def test_a_task_failing_on_its_own_fails_once_its_own_failing_time_passes_the_bound() -> None:
    # The endpoint's spell keeps starting again (other calls succeed), the task's does not.
    flaky = Scripted(down_since(10))
    with task_scope(failing_since=time.time() - 400), pytest.raises(LLMError) as failed:
        run(backend(flaky, outage_s=300), flaky, 1)
    assert not isinstance(failed.value, BudgetShort)
    assert "400 s of outage (llm.outage_s 300)" in str(failed.value)
    with task_scope(), pytest.raises(ModelUnavailable) as waiting:
        run(backend(flaky, outage_s=300), flaky, 1)
    assert waiting.value.since == pytest.approx(time.time(), abs=5)  # carried to its next run


def test_a_mix_of_throttled_and_failing_calls_re_queues_the_task() -> None:
    since = time.time() - 10

    def mixed(request: ChatRequest) -> Completion:
        if request.messages[0]["content"] == "w0":
            return Completion(error="HTTP 429", retryable=True, throttled=True)
        return Completion(error="HTTP 503", retryable=True, failing_since=since)

    both = Scripted(mixed)
    with task_scope(), pytest.raises(ModelUnavailable, match="HTTP 503"):
        run(backend(both, outage_s=300), both, 2)
    throttled = Scripted(lambda _: Completion(error="HTTP 429", retryable=True, throttled=True))
    with task_scope(), pytest.raises(BudgetShort) as short:
        run(backend(throttled, outage_s=300), throttled, 2)
    assert not isinstance(short.value, ModelUnavailable)


def test_a_question_past_its_deadline_is_not_tried_again() -> None:
    engine = Scripted(lambda _: Completion(error="HTTP 503", retryable=True))
    slept: list[float] = []
    llm = LLMSettings(backoff_s=5.0)
    b = ModelBackend("openai", llm, MemorySettings(), engine, engine, sleep=slept.append)
    with deadline_scope(time.time() + 1), pytest.raises(ModelBusy, match="stopped waiting"):
        run(b, engine, 1)
    assert len(engine.sent) == 1 and slept == []  # no 5 s backoff past a caller waiting 1 s


def test_a_question_s_http_call_waits_no_longer_than_its_caller() -> None:
    slow = completion('{"x": 1}')[:3]
    with serve(lambda _: (*slow, 2.0)) as server:
        endpoint = LLMEndpoint(base_url=server.base_url, model="m", api_key=SecretStr("k"))
        llm = LLMSettings(timeout_s=30.0, structured_output="json_object")
        transport = OpenAITransport(endpoint, llm, "general")
        request = _request()
        with deadline_scope(time.time() + 0.5):
            done = transport.complete([request])[0]
    assert done.error is not None and "stopped" in done.error
    assert not done.retryable


def test_a_call_s_digest_names_the_model_that_answers_it() -> None:
    request = requests(1)[0]
    old = call_digest(request, "m1@http://llm/v1")
    assert old != call_digest(request, "m2@http://llm/v1")
    assert old == call_digest(request, "m1@http://llm/v1")
    endpoint = LLMEndpoint(base_url="http://llm/v1", model="m1")
    assert OpenAITransport(endpoint, LLMSettings(), "general").endpoint == "m1@http://llm/v1"


def test_people_differing_only_in_case_are_matched_exactly() -> None:
    known = ["Ann", "ann", "Bob"]
    assert _people(["ann"], known) == ["ann"]
    assert _people(["Ann"], known) == ["Ann"]
    assert _people(["ANN"], known) == []  # case alone cannot say which of the two
    assert _people(["bob", "Bob Smith", "ann's"], known) == ["Bob", "ann"]
    assert _people(["caroline's"], ["Caroline"]) == ["Caroline"]


def test_a_call_returning_after_its_job_was_erased_parks_nothing_in_redis() -> None:
    with flushed(REDIS_URL, decode_responses=True) as client:
        jobs, chunks = RedisJobs(client, 3600), RedisChunks(client, 3600)
        now = time.time()
        job = Job(
            job_id="j1", tenant="t", space="s", session_id="s1", created_at=now, updated_at=now
        )
        jobs.put_job(job, '{"session": "raw"}')
        assert chunks.put_call("t", "s", "s1", 0, "d0", "answer", job_id="j1")
        assert chunks.get_calls("t", "s", "s1") == {(0, "d0"): "answer"}
        jobs.cancel_job("t", "j1", "erased")  # the erasure: the payload goes, then the chunks
        chunks.drop_chunks("t", "s", "s1")
        assert not chunks.put_call("t", "s", "s1", 0, "d1", "late answer", job_id="j1")
        assert not client.exists(keys.chunks("t", "s", "s1"))
