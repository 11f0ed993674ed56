"""Model budgets across real `celery worker` processes, against the scripted OpenAI-protocol
server: a shared request budget holds at the server, a burst of 429s ends with every job
done, and a zero budget fails nothing but leaves its jobs waiting; a budget too tight for a
task's calls, or an outage of the endpoint longer than a call's tries, ends with each call
that succeeded made once; a prompt that always fails while its endpoint recovers fails its
job once it has failed for `llm.outage_s`."""

from __future__ import annotations

import threading
import time
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path

import pytest
import redis
from fastapi.testclient import TestClient
from pydantic import SecretStr

import api.main
from api.auth import KeyStore
from common.llm.budget import WAITING
from common.models.jobs import Job
from common.models.session import SessionInput, Turn
from common.settings import ApiSettings, BrokerSettings, Settings, StoreSettings
from common.store import records
from common.store.backends import open_store
from common.store.coordination.budgets import RedisBudgets, model_counters
from tests.helpers.fake_llm_server import (
    FakeLLM,
    Reply,
    error,
    rate_limited,
    schema_answer,
    serve,
)
from tests.helpers.workers import ALL_QUEUES, producer, worker_env
from workers.launch import WorkerProcess

pytestmark = pytest.mark.integration

SPACE = "budget"
TEXTS = [
    "I adopted a grey cat named Miso last week.",
    "We hiked the coastal trail near Porto on Sunday.",
    "My sister starts her new job at the clinic tomorrow.",
]


def sessions(count: int, turns: int) -> list[SessionInput]:
    """Sessions whose every turn has content words: one extractor call per turn, and no
    other call (the server's answers hold no facts)."""
    start = datetime(2024, 5, 1, 18)
    return [
        SessionInput(
            session_id=f"s{i}",
            started_at=start + timedelta(days=i),
            participants=["Maya", "Leo"],
            turns=[
                Turn(id=f"s{i}:{j}", speaker=("Maya", "Leo")[j % 2], text=f"{TEXTS[j]} ({i})")
                for j in range(turns)
            ],
        )
        for i in range(count)
    ]


def model_env(redis_url: str, data: Path, server: FakeLLM, **llm: str) -> dict[str, str]:
    store = open_store(StoreSettings(qdrant_path=data / "qdrant"), 384)
    records.create_space(store, "default", SPACE, exist_ok=True)
    store.close()
    env = worker_env(redis_url, data)
    env |= {
        "ATOMMEM_LLM__BACKEND": "openai",
        "ATOMMEM_LLM__GENERAL__BASE_URL": server.base_url,
        "ATOMMEM_LLM__GENERAL__MODEL": "fake",
        "ATOMMEM_LLM__STRUCTURED_OUTPUT": "json_schema",
        "ATOMMEM_LLM__BACKOFF_S": "0.2",
    }
    env |= {f"ATOMMEM_LLM__{k.upper()}": v for k, v in llm.items()}
    return env


JITTER_S = 0.5


def busiest_window(arrivals: list[float], period: float) -> int:
    """The most requests that arrived within any `period` seconds (a half-open window)."""
    times = sorted(arrivals)
    return max(
        (sum(1 for t in times[i:] if t - a < period) for i, a in enumerate(times)), default=0
    )


def test_two_workers_sharing_a_budget_never_exceed_it_at_the_server(
    tmp_path: Path, redis_url: str
) -> None:
    period, budget, count, turns = 10.0, 6, 7, 2  # 14 calls: more than two periods' budget
    with serve(schema_answer) as server:
        env = model_env(
            redis_url, tmp_path, server, general__rpm=str(budget), budget_period_s=str(period)
        )
        # A task under way waits for the budget up to half its soft limit (20 s here) rather
        # than give back calls it already made.
        env |= {
            "ATOMMEM_BROKER__SOFT_TIME_LIMIT": "40",
            "ATOMMEM_BROKER__TIME_LIMIT": "50",
            "ATOMMEM_BROKER__VISIBILITY_TIMEOUT": "120",
        }
        owner = WorkerProcess(env, tmp_path / "w1.log", ALL_QUEUES, name="w1")
        extractor = WorkerProcess(env, tmp_path / "w2.log", "extract", name="w2")
        try:
            owner.wait_ready()
            extractor.wait_ready()
            client = producer(redis_url)
            jobs = client.submit("default", SPACE, sessions(count, turns))
            done = client.wait("default", [j.job_id for j in jobs], timeout=300)
        finally:
            extractor.stop()
            owner.stop()
        arrivals = list(server.arrivals)
    assert [j.state for j in done] == ["done"] * count
    assert all(j.reason is None for j in done)
    # A batch re-queued after it waited its patience out keeps the calls that went through.
    assert len(arrivals) == count * turns
    busiest = busiest_window(arrivals, period)
    # The workers take their budget at most `budget` per `period`; what the server sees adds
    # each request's own way there (a thread to be scheduled, a connection to open), which on
    # a loaded 2-core machine varies by more than the pacing's 1% margin. The check at the
    # server allows that much jitter: no `period - JITTER_S` window holds more than `budget`.
    held = busiest_window(arrivals, period - JITTER_S)
    span = max(arrivals) - min(arrivals)
    print(
        f"\n{len(arrivals)} requests over {span:.1f} s; budget {budget} per {period:g} s; "
        f"busiest {period:g} s window: {busiest}; mean rate "
        f"{(len(arrivals) - 1) / span * period:.2f} per {period:g} s"
    )
    gaps = [b - a for a, b in zip(arrivals, arrivals[budget:], strict=False)]
    print(f"shortest time from a request to the {budget}th after it: {min(gaps):.3f} s")
    assert held <= budget, (busiest, held)
    both = {"w1", "w2"}
    logs = {w: (tmp_path / f"{w}.log").read_text() for w in both}
    assert all("atommem.extract" in log for log in logs.values()), "both workers extracted"
    counters = model_counters(redis.Redis.from_url(redis_url, decode_responses=True))
    (counts,) = counters.values()
    assert counts["calls"] == count * turns and counts["waits"] + counts["requeues"] > 0


def test_a_burst_of_429s_ends_with_every_job_done(tmp_path: Path, redis_url: str) -> None:
    burst, count, turns = 8, 3, 2
    with serve(schema_answer) as server:
        server.then(*[rate_limited(1)] * burst)
        env = model_env(redis_url, tmp_path, server)
        worker = WorkerProcess(env, tmp_path / "w.log", ALL_QUEUES)
        try:
            worker.wait_ready()
            client = producer(redis_url)
            jobs = client.submit("default", SPACE, sessions(count, turns))
            done = client.wait("default", [j.job_id for j in jobs], timeout=300)
        finally:
            worker.stop()
        sent = len(server.requests)
    assert [j.state for j in done] == ["done"] * count
    # A batch re-queued after its tries keeps its calls that went through: each is made once.
    assert sent == burst + count * turns
    job_429s = sum(j.counts.get("llm.endpoint.general.throttled", 0) for j in done)
    assert job_429s <= burst  # a task re-queued after its tries loses its chunk's counts
    assert sum(j.counts.get("llm.endpoint.general.calls", 0) for j in done) >= count * turns

    settings = Settings(
        broker=BrokerSettings(url=redis_url), api=ApiSettings(admin_key=SecretStr("admin-key"))
    )
    conn = redis.Redis.from_url(redis_url, decode_responses=True)
    keystore = KeyStore(conn, "admin-key")
    keystore.create_tenant("default")
    key = str(keystore.create_key("default")["api_key"])
    with TestClient(api.main.create_app(settings)) as http:
        refused = http.get("/v1/metrics/models", headers={"Authorization": f"Bearer {key}"})
        reply = http.get("/v1/metrics/models", headers={"Authorization": "Bearer admin-key"})
    assert refused.status_code == 403  # the endpoints are the deployment's, not a tenant's
    assert reply.status_code == 200, reply.text
    (endpoint,) = reply.json()["endpoints"]
    assert endpoint["endpoint"] == f"fake@{server.base_url}"
    assert endpoint["throttled"] == burst
    assert endpoint["calls"] == sent


def test_a_zero_budget_fails_nothing_and_jobs_say_they_wait(tmp_path: Path, redis_url: str) -> None:
    with serve(schema_answer) as server:
        env = model_env(redis_url, tmp_path, server, general__rpm="0")
        worker = WorkerProcess(env, tmp_path / "w.log", ALL_QUEUES)
        try:
            worker.wait_ready()
            client = producer(redis_url)
            ids = [j.job_id for j in client.submit("default", SPACE, sessions(2, 2))]
            deadline = time.monotonic() + 60
            found: list[Job] = []
            while time.monotonic() < deadline:
                found = [client.job("default", j) for j in ids]
                if all((j.reason or "").startswith(WAITING) for j in found):
                    break
                time.sleep(0.2)
            time.sleep(3)  # a few re-queues later
            later = [client.job("default", j) for j in ids]
        finally:
            worker.stop()
        sent = len(server.requests)
    says = f"{WAITING}: fake@{server.base_url} allows no call (a zero rpm, tpm or max_concurrent)"
    assert [j.reason for j in found] == [says] * 2
    assert [(j.state, j.reason) for j in later] == [("extracting", says)] * 2
    assert sent == 0
    (counts,) = model_counters(redis.Redis.from_url(redis_url, decode_responses=True)).values()
    assert counts["requeues"] >= 2 and counts["calls"] == 0


def long_session(turns: int = 8) -> SessionInput:
    """One session of `turns` turns with content words: one extract task of `turns` windows,
    one extractor call each (the server's answers hold no facts: no other call)."""
    (session,) = sessions(1, 1)
    return session.model_copy(
        update={
            "turns": [
                Turn(id=f"s0:{j}", speaker=("Maya", "Leo")[j % 2], text=f"{TEXTS[j % 3]} ({j})")
                for j in range(turns)
            ]
        }
    )


def window_of(request: dict[str, object]) -> str:
    """Which window a request asks about: its prompt (each window's turns differ)."""
    return repr(request["messages"])


class Outage:
    """The server answers the first `before` requests, then 503s for `outage_s` seconds,
    then answers again; it counts the answered requests per window."""

    def __init__(self, before: int, outage_s: float) -> None:
        self.before, self.outage_s = before, outage_s
        self.lock = threading.Lock()
        self.seen = 0
        self.until: float | None = None
        self.failed = 0
        self.answered: Counter[str] = Counter()

    def __call__(self, request: dict[str, object]) -> Reply:
        with self.lock:
            self.seen += 1
            if self.until is None and self.seen > self.before:
                self.until = time.time() + self.outage_s
            if self.until is not None and time.time() < self.until:
                self.failed += 1
                return error(503, "upstream overloaded")
            self.answered[window_of(request)] += 1
        return schema_answer(request)


def test_a_budget_too_tight_for_a_task_calls_each_window_once(
    tmp_path: Path, redis_url: str
) -> None:
    # 2 calls per 6 s: the task waits for the budget at most half its 15 s soft limit, so
    # its 8 windows cannot go in one run; each run keeps the calls that went through.
    with serve(schema_answer) as server:
        env = model_env(redis_url, tmp_path, server, general__rpm="2", budget_period_s="6")
        worker = WorkerProcess(env, tmp_path / "w.log", ALL_QUEUES)
        try:
            worker.wait_ready()
            client = producer(redis_url)
            (job,) = client.submit("default", SPACE, [long_session(8)])
            (done,) = client.wait("default", [job.job_id], timeout=150)
        finally:
            worker.stop()
        per_window = Counter(window_of(r) for r in server.requests)
    counters = model_counters(redis.Redis.from_url(redis_url, decode_responses=True))
    (counts,) = counters.values()
    print(f"\nmodel calls per window: {sorted(per_window.values())}; requeues {counts['requeues']}")
    assert (done.state, done.reason) == ("done", None)
    assert counts["requeues"] > 0  # the task did go back to its queue
    assert len(per_window) == 8 and set(per_window.values()) == {1}
    assert done.counts["llm.extract.calls"] == 8  # every window counted once
    assert done.counts["llm.extract.replayed"] >= 1


def test_an_outage_longer_than_a_call_tries_ends_with_each_window_answered_once(
    tmp_path: Path, redis_url: str
) -> None:
    # Tries with 0.2 s doubling waits span well under a second; the endpoint fails for 12 s.
    outage = Outage(before=3, outage_s=12)
    with serve(outage) as server:
        env = model_env(redis_url, tmp_path, server)
        worker = WorkerProcess(env, tmp_path / "w.log", ALL_QUEUES)
        try:
            worker.wait_ready()
            client = producer(redis_url)
            (job,) = client.submit("default", SPACE, [long_session(8)])
            (done,) = client.wait("default", [job.job_id], timeout=120)
        finally:
            worker.stop()
    print(f"\n503s: {outage.failed}; answered per window: {sorted(outage.answered.values())}")
    assert (done.state, done.reason) == ("done", None)
    assert outage.failed > 0
    assert len(outage.answered) == 8 and set(outage.answered.values()) == {1}
    assert done.counts["llm.extract.calls"] == 8


def test_a_job_failed_by_a_long_outage_keeps_its_counts_and_resumes(
    tmp_path: Path, redis_url: str
) -> None:
    outage = Outage(before=3, outage_s=10)
    with serve(outage) as server:
        env = model_env(redis_url, tmp_path, server, outage_s="2")
        worker = WorkerProcess(env, tmp_path / "w.log", ALL_QUEUES)
        try:
            worker.wait_ready()
            client = producer(redis_url)
            session = long_session(8)
            (job,) = client.submit("default", SPACE, [session])
            (failed,) = client.wait("default", [job.job_id], timeout=60)
            assert outage.until is not None
            time.sleep(max(0.0, outage.until - time.time()) + 0.5)
            client.submit("default", SPACE, [session])  # a failed job is sent again
            (done,) = client.wait("default", [job.job_id], timeout=60)
        finally:
            worker.stop()
    assert failed.state == "failed"
    assert failed.counts.get("llm.extract.calls") == 3  # the calls that went through, kept
    assert "of outage (llm.outage_s 2)" in (failed.reason or ""), failed.reason
    assert (done.state, done.reason) == ("done", None)
    assert len(outage.answered) == 8 and set(outage.answered.values()) == {1}


class OnePromptDown:
    """The server answers every window but one, which always gets a 503; meanwhile other
    callers' calls keep succeeding on the endpoint (`busy`), so its failing spell keeps
    ending."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.windows: list[str] = []
        self.failed = 0

    def __call__(self, request: dict[str, object]) -> Reply:
        window = window_of(request)
        with self.lock:
            if window not in self.windows:
                self.windows.append(window)
            if len(self.windows) > 3 and window == self.windows[3]:  # the 4th window seen
                self.failed += 1
                return error(503, "upstream overloaded")
        return schema_answer(request)


def test_a_prompt_that_always_fails_ends_its_job_though_its_endpoint_recovers(
    tmp_path: Path, redis_url: str
) -> None:
    down = OnePromptDown()
    stop = threading.Event()
    with serve(down) as server:
        budgets = RedisBudgets(redis.Redis.from_url(redis_url, decode_responses=True))
        endpoint = f"fake@{server.base_url}"

        def others_succeed() -> None:
            while not stop.wait(0.05):
                budgets.recovered(endpoint)

        busy = threading.Thread(target=others_succeed, daemon=True)
        env = model_env(redis_url, tmp_path, server, outage_s="2")
        worker = WorkerProcess(env, tmp_path / "w.log", ALL_QUEUES)
        try:
            worker.wait_ready()
            busy.start()
            client = producer(redis_url)
            (job,) = client.submit("default", SPACE, [long_session(8)])
            (failed,) = client.wait("default", [job.job_id], timeout=60)
        finally:
            stop.set()
            worker.stop()
    print(f"\n503s of the one prompt: {down.failed}")
    assert failed.state == "failed", failed.reason
    assert "of outage (llm.outage_s 2)" in (failed.reason or ""), failed.reason
    assert failed.counts.get("llm.extract.calls") == 7  # the calls that went through, kept
