"""The `openai` backend against a scripted server on loopback: structured-output negotiation,
the one retry layer (429, 5xx, timeouts, malformed output), permanent errors, token counts."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest

from common.llm import usage
from common.llm.contracts import EvidenceItem, FactView, QueryIntent
from common.llm.model_backend import ModelBackend
from common.llm.openai_compat import OpenAITransport
from common.llm.prompts import intent
from common.llm.transport import LLMError
from common.settings import LLMEndpoint, LLMSettings, MemorySettings
from tests.helpers.fake_llm_server import FakeLLM, Reply, completion, error, serve, tool_call

INTENT = {
    "people": ["Ann"],
    "keywords": ["cat"],
    "start": "2024-05-01",
    "end": "",
    "profile": False,
    "style": "temporal",
}
NOW = datetime(2024, 5, 20, 12, 0)


def ok(request: dict[str, Any]) -> Reply:
    return completion(json.dumps(INTENT))


@pytest.fixture
def server() -> Iterator[FakeLLM]:
    with serve(ok) as state:
        yield state


def backend(server: FakeLLM, sleeps: list[float] | None = None, **llm: Any) -> ModelBackend:
    settings = LLMSettings(
        backend="openai",
        general=LLMEndpoint(base_url=server.base_url, model="fake"),
        max_attempts=llm.pop("max_attempts", 3),
        **llm,
    )
    transport = OpenAITransport(settings.general, settings, "general")
    record = sleeps if sleeps is not None else []
    return ModelBackend(
        "openai", settings, MemorySettings(), transport, transport, sleep=record.append
    )


def ask_intent(b: ModelBackend) -> QueryIntent:
    return b.query_intent("When did Ann adopt the cat?", ["Ann", "Bob"], NOW)


def test_a_server_that_takes_json_schema_keeps_it(server: FakeLLM) -> None:
    b = backend(server)
    intent = ask_intent(b)
    assert intent.participants == ["Ann"] and intent.style == "temporal"
    assert intent.time_range is not None and str(intent.time_range.start) == "2024-05-01"
    assert [r["response_format"]["type"] for r in server.requests] == ["json_schema"]
    schema = server.requests[0]["response_format"]["json_schema"]["schema"]
    assert set(schema["required"]) == set(INTENT)


def test_refused_json_schema_falls_back_to_json_object_once(server: FakeLLM) -> None:
    refusal = error(500, "1 validation error: Input should be 'text' or 'json_object'")

    def refuse_schema(request: dict[str, Any]) -> Reply:
        if request.get("response_format", {}).get("type") == "json_schema":
            return refusal
        return ok(request)

    server.default = refuse_schema
    b = backend(server)
    ask_intent(b)
    ask_intent(b)
    kinds = [r["response_format"]["type"] for r in server.requests]
    assert kinds == ["json_schema", "json_object", "json_object"]  # negotiated once
    assert server.requests[1]["response_format"]["schema"]["properties"].keys() == INTENT.keys()


def test_a_server_without_response_format_gets_a_forced_tool_call(server: FakeLLM) -> None:
    def tools_only(request: dict[str, Any]) -> Reply:
        if "response_format" in request:
            return error(400, "response_format is not supported")
        assert request["tool_choice"]["function"]["name"] == request["tools"][0]["function"]["name"]
        return tool_call(json.dumps(INTENT))

    server.default = tools_only
    intent = ask_intent(backend(server))
    assert intent.participants == ["Ann"]
    assert len(server.requests) == 3


@pytest.mark.parametrize(
    "failure",
    [
        error(429, "slow down", {"retry-after": "3"}),
        error(503, "overloaded"),
        completion('{"people": ["Ann"], "keywords": '),  # malformed JSON
        completion(json.dumps({**INTENT, "style": "poetic"})),  # fails the response model
        completion(json.dumps(INTENT)[:40], finish="length"),  # cut off at max_tokens
    ],
    ids=["429", "503", "malformed", "invalid", "truncated"],
)
def test_a_failed_try_is_retried_then_succeeds(server: FakeLLM, failure: Reply) -> None:
    server.then(lambda _: failure)
    sleeps: list[float] = []
    with usage.metered() as used:
        intent = ask_intent(backend(server, sleeps))
    assert intent.participants == ["Ann"]
    assert len(server.requests) == 2
    assert len(sleeps) == 1
    if failure[0] == 429:
        assert sleeps == [3.0]  # the server's Retry-After wins over the shorter backoff
    # Tokens are counted for every completion the server returned, valid or not.
    calls = 1 if failure[0] != 200 else 2
    assert used.stages["intent"]["calls"] == calls
    assert used.stages["intent"]["prompt_tokens"] == 11 * calls


def test_the_last_failure_is_a_clear_error(server: FakeLLM) -> None:
    server.default = lambda _: error(502, "bad gateway")
    sleeps: list[float] = []
    with pytest.raises(LLMError, match=r"'intent' failed after 3 tries: HTTP 502"):
        ask_intent(backend(server, sleeps, backoff_s=0.5))
    assert len(server.requests) == 3
    assert sleeps == [0.5, 1.0]  # doubling waits between tries, none after the last


def test_a_timeout_is_retried_and_reported(server: FakeLLM) -> None:
    server.default = lambda _: (*completion(json.dumps(INTENT))[:3], 1.0)
    with pytest.raises(LLMError, match="timed out after 0.2 s"):
        ask_intent(backend(server, timeout_s=0.2, max_attempts=2))
    assert len(server.requests) == 2


def test_a_permanent_error_is_not_retried(server: FakeLLM) -> None:
    server.default = lambda _: error(401, "invalid api key")
    with pytest.raises(LLMError, match="HTTP 401"):
        ask_intent(backend(server))
    assert len(server.requests) == 1


def test_a_batch_retries_only_the_calls_that_failed(server: FakeLLM) -> None:
    def summary(request: dict[str, Any]) -> Reply:
        return completion(json.dumps({"summary": "Ann adopted a cat.", "keywords": ["cat"]}))

    server.default = summary
    server.then(lambda _: error(500, "boom"))
    b = backend(server)
    facts: list[list[FactView]] = [[], [], []]
    with usage.metered() as used:
        out = b.summarize_events([(f, None) for f in facts])
    assert [e.summary for e in out] == ["Ann adopted a cat."] * 3
    assert len(server.requests) == 4  # three calls, one of them tried twice
    assert used.stages["event_summary"]["calls"] == 3


def test_answers_cite_only_the_evidence_they_were_shown(server: FakeLLM) -> None:
    server.default = lambda _: completion(json.dumps({"answer": "In May.", "evidence": [2, 9]}))
    evidence = [
        EvidenceItem(fact_id="f1", text="Ann has a dog.", score=0.9),
        EvidenceItem(fact_id="f2", text="Ann adopted a cat in May.", score=0.8),
    ]
    intent = QueryIntent(style="temporal")
    out = backend(server).answer("When did Ann adopt the cat?", intent, evidence)
    assert out.text == "In May." and out.fact_ids == ["f2"]
    system = server.requests[0]["messages"][0]["content"]
    assert "asks when" in system  # the temporal style, chosen by the intent
    assert backend(server).answer("Anything?", intent, []).fact_ids == []
    assert len(server.requests) == 1  # no evidence: nothing to ask the model


def test_metadata_is_asked_in_bounded_slices_and_reassembled_in_order(server: FakeLLM) -> None:
    def items(request: dict[str, Any]) -> Reply:
        schema = request["response_format"]["json_schema"]["schema"]
        n = schema["properties"]["items"]["minItems"]
        facts = request["messages"][1]["content"].split("Facts:\n", 1)[1].splitlines()
        return completion(
            json.dumps(
                {
                    "items": [
                        {"people": ["Ann"], "keywords": [line.split(". ", 1)[1].lower()],
                         "start": "", "end": "", "lasting": False}
                        for line in facts[:n]
                    ]
                }
            )
        )  # fmt: skip

    server.default = items
    b = backend(server, metadata_batch=4)
    texts = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"]
    out = b.fact_metadata(texts, "Ann", ["Ann", "Bob"], NOW)
    assert [m.keywords for m in out] == [[t] for t in texts]
    sizes = [
        r["response_format"]["json_schema"]["schema"]["properties"]["items"]["maxItems"]
        for r in server.requests
    ]
    assert sorted(sizes) == [2, 4]


def test_batches_of_concurrent_tasks_are_each_bounded_on_their_own() -> None:
    """`llm.concurrency` bounds one batch: two tasks' batches of two calls each, with
    `concurrency=2`, have four calls at the server at once (a pool shared by the process
    held them to two, whatever a worker's slots)."""
    together = threading.Barrier(4, timeout=20)

    def all_four(request: dict[str, Any]) -> Reply:
        together.wait()  # answers only once four calls are in flight at the same time
        return ok(request)

    with serve(all_four) as server:
        settings = LLMSettings(
            backend="openai",
            general=LLMEndpoint(base_url=server.base_url, model="fake"),
            structured_output="json_schema",
            concurrency=2,
            max_attempts=1,
        )
        transport = OpenAITransport(settings.general, settings, "general")
        request = intent.request("When did Ann adopt the cat?", ["Ann"], NOW, 256)
        done: list[list[Any]] = []
        tasks = [
            threading.Thread(target=lambda: done.append(transport.complete([request] * 2)))
            for _ in range(2)
        ]
        for t in tasks:
            t.start()
        for t in tasks:
            t.join(30)
        assert not together.broken
        assert [c.error for batch in done for c in batch] == [None] * 4


def test_a_revised_event_summary_sends_the_summary_and_only_the_facts_added_since() -> None:
    from common.llm.contracts import EventSummary
    from common.llm.prompts import event_summary
    from common.models.memory import FactTime

    def fact(i: int, text: str) -> FactView:
        when = FactTime(session=datetime(2024, 3, 1, 12, 0))
        return FactView(id=f"f{i}", text=text, participants=["Ann"], keywords=[], time=when)

    members = [fact(0, "Ann paints landscapes."), fact(1, "Ann framed a painting.")]
    first = event_summary.request(members, None, 200).messages[-1]["content"]
    assert "Ann paints landscapes." in first and "Ann framed a painting." in first
    previous = EventSummary(summary="Ann paints.", keywords=["paints"], sources=["f0"])
    revised = event_summary.request(members, previous, 200).messages[-1]["content"]
    assert "Ann paints." in revised and "Ann framed a painting." in revised
    assert "Ann paints landscapes." not in revised  # covered by the summary already
