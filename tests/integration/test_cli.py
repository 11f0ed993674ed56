"""The `atommem` command as a user runs it: real embedding model, Qdrant local mode."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.helpers.cli import run
from tests.helpers.samples import SAMPLE, TINY_LOCOMO

pytestmark = pytest.mark.integration


def counts(data: Path, space: str) -> list[str]:
    out = run(data, "stats", "--space", space)
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()[1].split()[1:]


def test_ingest_is_idempotent_and_memory_answers(tmp_path: Path) -> None:
    assert run(tmp_path, "space", "create", "demo").returncode == 0
    first = run(tmp_path, "ingest", str(SAMPLE))
    assert first.returncode == 0, first.stderr
    assert "4 sessions (0 unchanged)" in first.stdout
    before = counts(tmp_path, "demo")
    sessions, facts, events, profiles = (int(c) for c in before)
    assert sessions == 4 and facts > 15 and events >= 1 and profiles >= 1

    again = run(tmp_path, "ingest", str(SAMPLE))
    assert again.returncode == 0 and "4 sessions (4 unchanged)" in again.stdout
    assert counts(tmp_path, "demo") == before

    hits = run(tmp_path, "search", "--space", "demo", "--json", "When did Tom adopt a puppy?")
    assert hits.returncode == 0, hits.stderr
    ranked = json.loads(hits.stdout)["hits"]
    assert "beagle" in ranked[0]["text"] and ranked[0]["turn_ids"] == ["s1:3"]

    profiles_out = run(tmp_path, "profiles", "--space", "demo")
    assert "Priya lives in Denver" in profiles_out.stdout
    assert "2024-03-04 .. 2024-06-02: Priya lives in Boston" in profiles_out.stdout


def _assert_clean_error(out: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    assert out.stderr.startswith("error: ")
    for needle in needles:
        assert needle in out.stderr, out.stderr


def test_bad_input_names_the_problem_and_stores_nothing(tmp_path: Path) -> None:
    assert run(tmp_path, "space", "create", "x").returncode == 0
    broken = tmp_path / "broken.json"
    broken.write_text('{"session_id": "a", "turns": [', encoding="utf-8")
    _assert_clean_error(run(tmp_path, "ingest", "--space", "x", str(broken)), "malformed JSON")

    good = json.loads(SAMPLE.read_text(encoding="utf-8"))
    good["sessions"][2]["turns"][1]["speaker"] = "Mallory"
    bad_speaker = tmp_path / "bad_speaker.json"
    bad_speaker.write_text(json.dumps(good), encoding="utf-8")
    _assert_clean_error(
        run(tmp_path, "ingest", "--space", "x", str(bad_speaker)),
        "unknown speaker 'Mallory'",
        "sessions.2",
    )

    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"participants": ["A"], "sessions": []}), encoding="utf-8")
    _assert_clean_error(run(tmp_path, "ingest", "--space", "x", str(empty)), "'sessions' is empty")

    missing = tmp_path / "missing.json"
    missing.write_text(
        json.dumps(
            {
                "session_id": "a",
                "participants": ["A"],
                "turns": [{"speaker": "A", "text": "hi there friend"}],
            }
        )
    )
    _assert_clean_error(run(tmp_path, "ingest", "--space", "x", str(missing)), "started_at")

    # a valid file beside a bad one: nothing is stored from either
    _assert_clean_error(
        run(tmp_path, "ingest", "--space", "x", str(SAMPLE), str(broken)), "malformed JSON"
    )
    assert counts(tmp_path, "x") == ["0", "0", "0", "0"]


def test_unknown_space_is_a_clear_error(tmp_path: Path) -> None:
    _assert_clean_error(
        run(tmp_path, "ingest", "--space", "nope", str(SAMPLE)), "space 'nope' does not exist"
    )
    _assert_clean_error(run(tmp_path, "search", "--space", "nope", "anything"), "does not exist")
    _assert_clean_error(run(tmp_path, "facts", "--space", "nope"), "does not exist")


def test_correct_rewrites_a_fact_and_facts_shows_what_it_read(tmp_path: Path) -> None:
    assert run(tmp_path, "space", "create", "demo").returncode == 0
    assert run(tmp_path, "ingest", str(SAMPLE)).returncode == 0
    listed = run(tmp_path, "facts", "--space", "demo", "--json")
    facts = [json.loads(line) for line in listed.stdout.splitlines() if line.startswith("{")]
    (home,) = [f for f in facts if f["text"].startswith("Priya lives in Boston")]
    text = "Priya lives in Cambridge."
    fixed = run(tmp_path, "correct", "--space", "demo", "--fact", home["id"], "--reason",
                "the city was wrong", text)  # fmt: skip
    assert fixed.returncode == 0, fixed.stderr
    receipt = json.loads(fixed.stdout)
    assert receipt["changed"] and receipt["fact"]["text"] == text
    shown = run(tmp_path, "facts", "--space", "demo").stdout
    assert f"- {text}" in shown and "(corrected " in shown and ": the city was wrong)" in shown
    _assert_clean_error(
        run(tmp_path, "correct", "--space", "demo", "--fact", home["id"], "  "),
        "correction: text: Value error, must not be blank",
    )
    _assert_clean_error(
        run(tmp_path, "correct", "--space", "demo", "--fact", "nope", text), "no fact 'nope'"
    )


def test_bench_locomo_and_report_on_an_unseen_conversation(tmp_path: Path) -> None:
    conversations = tmp_path / "conversations"
    conversations.mkdir()
    (conversations / "tiny.json").write_text(json.dumps(TINY_LOCOMO), encoding="utf-8")
    out = tmp_path / "results"
    bench = run(
        tmp_path / "data",
        "bench", "locomo", "--conversations", str(conversations), "--variant", "full",
        "--variant", "raw-turns", "--variant", "hybrid-bm25", "--k", "2", "--answer",
        "--out", str(out),
    )  # fmt: skip
    assert bench.returncode == 0, bench.stderr
    full = json.loads((out / "locomo_full.json").read_text(encoding="utf-8"))
    raw = json.loads((out / "locomo_raw-turns.json").read_text(encoding="utf-8"))
    hybrid = json.loads((out / "locomo_hybrid-bm25.json").read_text(encoding="utf-8"))
    assert full["summary"]["overall"]["questions"] == 3 == raw["summary"]["overall"]["questions"]
    assert hybrid["summary"]["overall"]["questions"] == 3
    assert "lexical" in full["latency_ms"]
    # the baseline ranks the facts memory holds, with their source turns
    fact_ids = {h["fact_id"] for row in full["questions"] for h in row["retrieved"]}
    assert fact_ids & {h["fact_id"] for row in hybrid["questions"] for h in row["retrieved"]}
    assert full["ingest"]["sessions"] == 2 and full["ingest"]["facts"] >= 3
    assert full["latency_ms"]["total"]["p50"] > 0 and "graph" in full["latency_ms"]
    first = full["questions"][0]
    assert (first["conversation"], first["index"], first["category"]) == ("tiny", 0, 4)
    assert 0 < len(first["retrieved"]) <= 2 and "f1" in first
    # the recall in the file is what its retrieved turn ids give
    for row in full["questions"] + raw["questions"] + hybrid["questions"]:
        covered = {t for r in row["retrieved"] for t in r["dia_ids"]}
        assert row["recall"] == len(covered & set(row["evidence"])) / len(set(row["evidence"]))
    again = run(
        tmp_path / "data", "bench", "locomo", "--conversations", str(conversations),
        "--variant", "flat", "--out", str(tmp_path / "flat.json"),
    )  # fmt: skip
    assert again.returncode == 2 and "already exists" in again.stderr
    report = run(tmp_path, "bench", "report", str(out), "--out", str(tmp_path / "report"))
    assert report.returncode == 0, report.stderr
    markdown = (tmp_path / "report" / "report.md").read_text(encoding="utf-8")
    assert "raw-turns" in markdown and "paper AtomMem (full)" in markdown
    assert (tmp_path / "report" / "recall_by_category.png").read_bytes()[:4] == b"\x89PNG"
