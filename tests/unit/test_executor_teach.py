"""`atommem executor teach` against a scripted teacher on loopback: one versioned sample per
turn with its provenance, resumed runs, budgets, unusable answers and clear errors."""

from __future__ import annotations

import json
from pathlib import Path

from common.executor.samples import SCHEMA, read_samples
from common.llm.prompts import extract
from tests.helpers.cli import run
from tests.helpers.fake_llm_server import completion
from tests.helpers.ports import free_port
from tests.helpers.samples import SAMPLE
from tests.helpers.teacher import facts_of, target_turn, teacher

TURNS = 20  # the sample conversation's turns, one window each


def samples_of(data: Path) -> Path:
    return data / "executor" / "samples.jsonl"


def test_one_sample_per_turn_with_provenance_then_nothing_twice(tmp_path: Path) -> None:
    with teacher() as server:
        done = run(tmp_path, "executor", "teach", str(SAMPLE), "--teacher", server.base_url)
        assert done.returncode == 0, done.stderr
        assert len(server.requests) == TURNS
        again = run(tmp_path, "executor", "teach", str(SAMPLE), "--teacher", server.base_url)
        assert again.returncode == 0, again.stderr
        assert len(server.requests) == TURNS  # every window there already: none asked again
    assert f"0 samples written, {TURNS} there before, 0 left" in again.stderr
    lines = samples_of(tmp_path).read_text().splitlines()
    assert len(lines) == TURNS
    first = json.loads(lines[1])
    assert (first["schema"], first["version"]) == (SCHEMA, 1)
    samples = read_samples(samples_of(tmp_path))
    sample = samples[1]
    assert sample.conversation == "demo" and sample.source.kind == "file"
    assert sample.window.session_id == "s1" and sample.turn_ids == ["s1:2"]
    assert [t.id for t in sample.window.context] == ["s1:1"]
    assert sample.instruction.startswith(extract.SYSTEM.strip())
    assert "Target turn:\nPriya: Busy but good." in sample.prompt
    assert sample.facts == facts_of("Priya", sample.window.turns[0].text)
    p = sample.provenance
    assert (p.teacher_model, p.teacher_url) == ("teacher", server.base_url)
    assert (p.prompt_stage, p.prompt_version) == ("extract", extract.VERSION)
    assert (p.prompt_tokens, p.completion_tokens) == (50, 20)
    assert len({s.id for s in samples}) == TURNS


def test_a_budget_stops_the_run_and_the_next_run_resumes(tmp_path: Path) -> None:
    with teacher() as server:
        args = ["executor", "teach", str(SAMPLE), "--teacher", server.base_url]
        first = run(tmp_path, *args, "--max-samples", "3")
        assert first.returncode == 0, first.stderr
        assert "budget reached" in first.stderr and "run the same command again" in first.stderr
        assert len(read_samples(samples_of(tmp_path))) == 3
        tokens = run(tmp_path, *args, "--budget-tokens", "1")  # one batch, then the limit
        assert "budget reached" in tokens.stderr
        rest = run(tmp_path, *args)
        assert rest.returncode == 0, rest.stderr
    assert len(read_samples(samples_of(tmp_path))) == TURNS
    assert len(samples_of(tmp_path).read_text().splitlines()) == TURNS
    assert len(server.requests) == TURNS


def test_an_unusable_answer_is_left_for_the_next_run(tmp_path: Path) -> None:
    with teacher() as server:
        server.then(lambda _: completion("not json"))
        first = run(tmp_path, "executor", "teach", str(SAMPLE), "--teacher", server.base_url)
        assert first.returncode == 0, first.stderr
        assert "1 windows got no usable answer" in first.stderr
        assert len(read_samples(samples_of(tmp_path))) == TURNS - 1
        run(tmp_path, "executor", "teach", str(SAMPLE), "--teacher", server.base_url)
    assert len(read_samples(samples_of(tmp_path))) == TURNS


def test_an_unreachable_teacher_stops_with_a_resumable_message(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    done = run(tmp_path, "executor", "teach", str(SAMPLE), "--teacher", url)
    assert done.returncode == 2
    assert f"the teacher at {url} failed: cannot reach {url}" in done.stderr
    assert "run the same command again to resume" in done.stderr


def test_no_teacher_and_no_input_say_what_is_missing(tmp_path: Path) -> None:
    done = run(tmp_path, "executor", "teach", str(SAMPLE))
    assert done.returncode == 2
    assert "no teacher: pass --teacher URL" in done.stderr
    missing = run(tmp_path, "executor", "teach", "nowhere", "--teacher", "http://127.0.0.1:9/v1")
    assert missing.returncode == 2
    assert "'nowhere': no such file, and no such space" in missing.stderr


def test_the_stored_sessions_of_a_space_teach(tmp_path: Path) -> None:
    ingested = run(tmp_path, "ingest", str(SAMPLE), "--create-space")
    assert ingested.returncode == 0, ingested.stderr
    with teacher() as server:
        done = run(tmp_path, "executor", "teach", "demo", "--teacher", server.base_url)
        assert done.returncode == 0, done.stderr
    samples = read_samples(samples_of(tmp_path))
    assert len(samples) == TURNS
    assert {(s.source.kind, s.source.name, s.conversation) for s in samples} == {
        ("space", "demo", "demo")
    }
    assert samples[0].window.turns[0].text == "Hi Priya! How was your week?"  # session order
    assert ("Tom", "Hi Priya! How was your week?") in [target_turn(r) for r in server.requests]
