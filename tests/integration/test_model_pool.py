"""The model-pool stand-in (bench/model_pool.py) serving the extractor role to the real
`openai` backend: each structured-output form, a LoCoMo ingest that comes out exactly as the
authors' pre-extracted facts, the concurrency limit, and injected 429s and 5xx retried and
counted in the jobs. No figure here is a time."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from bench.model_pool import ModelPool, PoolConfig, load_facts
from common.inputs.formats import read_sessions
from common.llm.model_backend import ModelBackend
from common.llm.openai_compat import OpenAITransport
from common.llm.transport import LLMError
from common.memory.extract import windows
from common.models.jobs import Job
from common.models.memory import Fact
from common.models.session import SessionInput
from common.settings import LLMEndpoint, LLMSettings, MemorySettings, Settings, StoreSettings
from common.store.backends import open_store
from common.store.base import Kind
from common.store.coordination.roles import Coordination
from tests.helpers.cli import argv
from tests.helpers.memory_dump import dump
from workers.launch import ROOT

pytestmark = pytest.mark.integration

CONVERSATION = "conv-30.json"
# Sessions whose facts all sit on turns with a content word (the skip rule sends the rest to
# no extractor) and fit the extract schema's bounds.
SESSIONS = ("session_2", "session_3")


@pytest.fixture
def conversation(locomo: Path) -> Path:
    return locomo / "atommem_facts" / CONVERSATION


def sessions(path: Path) -> list[SessionInput]:
    return [s for s in read_sessions(path).sessions if s.session_id in SESSIONS]


def extractor_backend(pool: ModelPool, **llm: Any) -> ModelBackend:
    settings = LLMSettings.model_validate(
        {
            "extractor_backend": "openai",
            "extractor": {"base_url": pool.base_url, "model": "fact-executor"},
            "backoff_s": 0,
            **llm,
        }
    )
    transport = OpenAITransport(settings.extractor, settings, "extractor")
    return ModelBackend("openai+rules", settings, MemorySettings(), transport, transport)


@pytest.mark.parametrize("form", ["json_schema", "json_object", "tool", "auto"])
def test_the_stand_in_answers_each_turn_with_its_facts_in_each_form(
    conversation: Path, form: str
) -> None:
    session = sessions(conversation)[0]
    todo = windows(session, context_k=1)
    with ModelPool(load_facts(conversation)) as pool:
        backend = extractor_backend(pool, structured_output=form)
        got = backend.extract_facts_batch(todo)
        stats = pool.stats()
    assert [[f.text for f in facts] for facts in got] == [w.turns[0].facts for w in todo]
    pairs = zip(todo, got, strict=True)
    assert all(f.turn_ids == [w.turns[0].id] for w, facts in pairs for f in facts)
    assert stats["calls"] == {"200": len(todo)} and stats["unknown_turns"] == 0
    assert stats["facts"] == sum(len(w.turns[0].facts or []) for w in todo)


def test_an_unknown_turn_gets_no_facts_and_another_stage_a_clear_refusal(
    conversation: Path,
) -> None:
    session = sessions(conversation)[0]
    turn = session.turns[0].model_copy(update={"text": "Words no facts file holds."})
    unknown = session.model_copy(update={"turns": [turn]})
    with ModelPool(load_facts(conversation)) as pool:
        backend = extractor_backend(pool, structured_output="json_schema")
        assert backend.extract_facts_batch(windows(unknown, context_k=1)) == [[]]
        general = OpenAITransport(
            LLMEndpoint(base_url=pool.base_url), backend._llm, "general"
        )  # the general role sent here by mistake
        wrong = ModelBackend("openai", backend._llm, MemorySettings(), general, general)
        with pytest.raises(LLMError, match="serves the extractor role only .* not 'intent'"):
            wrong.query_intent("Where is Gina?", ["Gina", "Jon"], datetime(2023, 1, 1))
        stats = pool.stats()
    assert stats["unknown_turns"] == 1 and stats["known_turns"] == 0
    assert stats["calls"] == {"200": 1, "400": 1}


def test_at_most_c_calls_generate_at_once_and_the_rest_queue(conversation: Path) -> None:
    session = sessions(conversation)[0]
    todo = windows(session, context_k=1)[:8]
    config = PoolConfig(latency_ms=300, concurrency=2)
    with ModelPool(load_facts(conversation), config) as pool:
        backend = extractor_backend(pool, structured_output="json_schema", concurrency=8)
        backend.extract_facts_batch(todo)  # 8 calls offered at once
        stats = pool.stats()
        assert pool.reset_stats()["calls_total"] == len(todo)
        assert pool.stats()["calls_total"] == 0
    assert stats["calls"] == {"200": len(todo)}
    assert stats["max_in_flight"] == 2
    assert stats["max_queued"] > 0
    assert stats["in_flight"] == stats["queued"] == 0


# --- through `atommem ingest`, embedded, as a user runs it ---------------------------------


def write(path: Path, items: list[SessionInput], keep_facts: bool) -> Path:
    exclude = None if keep_facts else {"turns": {"__all__": {"facts"}}}
    docs = [s.model_dump(mode="json", exclude_none=True, exclude=exclude) for s in items]
    path.write_text(json.dumps({"participants": items[0].participants, "sessions": docs}))
    return path


def ingest(data: Path, source: Path, space: str, env: dict[str, str]) -> None:
    out = subprocess.run(
        argv(data, "ingest", "--create-space", "--space", space, str(source)),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**os.environ, **env},
    )
    assert out.returncode == 0, out.stderr


def stand_in_env(pool: ModelPool, **llm: str) -> dict[str, str]:
    """The extractor on the stand-in, the general role on `rules`."""
    env = {
        "ATOMMEM_LLM__EXTRACTOR_BACKEND": "openai",
        "ATOMMEM_LLM__GENERAL_BACKEND": "rules",
        "ATOMMEM_LLM__EXTRACTOR__BASE_URL": pool.base_url,
        "ATOMMEM_LLM__EXTRACTOR__MODEL": "fact-executor",
    }
    return env | {f"ATOMMEM_LLM__{k.upper()}": v for k, v in llm.items()}


def fact_texts(data: Path, space: str) -> list[str]:
    return sorted(fact[1] for fact in dump(data / "qdrant", "default", [space])[space]["facts"])


def jobs(data: Path, space: str) -> list[Job]:
    coord = Coordination.for_settings(Settings().in_data_dir(data))
    try:
        return coord.jobs.recent_jobs("default", space, 100)
    finally:
        coord.close()


def versions(data: Path, space: str) -> set[tuple[str, str, str]]:
    """Each role's backend and model, as the space's facts record them."""
    store = open_store(StoreSettings(qdrant_path=data / "qdrant"), 384)
    try:
        found = [Fact.model_validate(p.payload) for p in store.scroll(Kind.FACTS, "default", space)]
    finally:
        store.close()
    return {
        (v.extractor_backend, v.extractor_model, v.general_model)
        for v in (f.memory_version for f in found)
        if v is not None
    }


def total(found: list[Job], name: str) -> int:
    return sum(job.counts.get(name, 0) for job in found)


@pytest.fixture
def inputs(tmp_path: Path, conversation: Path) -> Iterator[tuple[Path, Path]]:
    items = sessions(conversation)
    yield (
        write(tmp_path / "facts.json", items, keep_facts=True),
        write(tmp_path / "dialogue.json", items, keep_facts=False),
    )


def test_an_ingest_extracted_by_the_stand_in_holds_exactly_the_pre_extracted_facts(
    tmp_path: Path, conversation: Path, inputs: tuple[Path, Path]
) -> None:
    facts, dialogue = inputs
    data = tmp_path / "data"
    ingest(data, facts, "given", {})
    with ModelPool(load_facts(conversation)) as pool:
        ingest(data, dialogue, "extracted", stand_in_env(pool))
        stats = pool.stats()
    assert fact_texts(data, "extracted") == fact_texts(data, "given")
    assert len(fact_texts(data, "given")) > 10
    assert stats["unknown_turns"] == 0 and stats["clipped_facts"] == 0
    done = jobs(data, "extracted")
    assert {job.state for job in done} == {"done"} and len(done) == len(SESSIONS)
    assert total(done, "llm.extract.calls") == stats["calls"]["200"] == stats["calls_total"]
    assert total(done, "llm.endpoint.extractor.calls") == stats["calls_total"]
    assert total(done, "llm.extract.completion_tokens") == stats["completion_tokens"]
    assert not any(name.startswith("llm.endpoint.general") for j in done for name in j.counts)
    assert versions(data, "extracted") == {("openai", "fact-executor", "rules")}
    assert versions(data, "given") == {("rules", "rules", "rules")}


def test_injected_429s_and_5xx_are_retried_and_counted_in_the_jobs(
    tmp_path: Path, conversation: Path, inputs: tuple[Path, Path]
) -> None:
    facts, dialogue = inputs
    data = tmp_path / "data"
    ingest(data, facts, "given", {})
    # Every 5th call a 429 and every 7th a 503; a call needs ten faults in a row to fail.
    config = PoolConfig(throttle_every=5, fail_every=7, retry_after_s=0)
    with ModelPool(load_facts(conversation), config) as pool:
        env = stand_in_env(pool, max_attempts="10", backoff_s="0")
        ingest(data, dialogue, "extracted", env)
        stats = pool.stats()
    assert fact_texts(data, "extracted") == fact_texts(data, "given")
    done = jobs(data, "extracted")
    assert {job.state for job in done} == {"done"}
    assert stats["calls"]["429"] > 0 and stats["calls"]["503"] > 0
    assert total(done, "llm.endpoint.extractor.throttled") == stats["calls"]["429"]
    assert total(done, "llm.endpoint.extractor.calls") == stats["calls_total"]
    assert total(done, "llm.extract.calls") == stats["calls"]["200"]


def test_the_command_prints_its_url_serves_stats_and_stops_on_sigterm(conversation: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.model_pool", "--facts", str(conversation),
         "--concurrency", "3", "--throttle-every", "2"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        base_url = proc.stdout.readline().strip()
        assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1")
        with urllib.request.urlopen(base_url.removesuffix("/v1") + "/stats", timeout=10) as r:
            stats = json.load(r)
        assert stats["calls_total"] == 0 and stats["config"]["concurrency"] == 3
        assert stats["config"]["throttle_every"] == 2
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert json.loads(err.splitlines()[-1])["calls_total"] == 0  # the last counts, on exit
