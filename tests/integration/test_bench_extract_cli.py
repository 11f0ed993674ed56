"""`atommem bench extract` as a user runs it: the `rules` extractor over a cut-down LoCoMo
conversation against its authors'-format facts, with the real embedding model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.fact_faults import FAULTS
from tests.helpers.cli import run
from tests.helpers.samples import TINY_LOCOMO, TINY_LOCOMO_FACTS

pytestmark = pytest.mark.integration


def _data(tmp_path: Path) -> tuple[Path, Path, Path]:
    conversations, facts = tmp_path / "conversations", tmp_path / "facts"
    conversations.mkdir()
    facts.mkdir()
    (conversations / "tiny.json").write_text(json.dumps(TINY_LOCOMO), encoding="utf-8")
    (facts / "tiny.json").write_text(json.dumps(TINY_LOCOMO_FACTS), encoding="utf-8")
    # a bench locomo result over the same conversation, for the downstream recall
    recall = tmp_path / "locomo_full.json"
    questions = [
        {"conversation": "tiny", "category": 4, "recall": 1.0},
        {"conversation": "tiny", "category": 1, "recall": 0.5},
        {"conversation": "other", "category": 4, "recall": 0.0},
    ]
    doc = {"variant": "full", "k": 10, "settings": {"llm_backend": "rules"}, "questions": questions}
    recall.write_text(json.dumps(doc), encoding="utf-8")
    return conversations, facts, recall


def test_bench_extract_writes_the_matching_faults_and_downstream_recall(tmp_path: Path) -> None:
    conversations, facts, recall = _data(tmp_path)
    out = tmp_path / "results" / "rules.json"
    done = run(
        tmp_path / "data", "bench", "extract", "--conversations", str(conversations),
        "--facts", str(facts), "--only", "tiny", "--out", str(out),
        "--recall-dialogue", str(recall), "--recall-facts", str(tmp_path / "missing.json"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["benchmark"] == "extract" and doc["settings"]["llm_backend"] == "rules"
    assert doc["threshold"] == 0.6 and doc["window_turns"] == 0
    summary = doc["summary"]
    assert summary["reference"] == 4 and summary["extracted"] >= 3
    # "I adopted a grey cat named Miso." -> "Ana adopted a grey cat named Miso.", the same
    # fact as the authors'; the authors' "Ben likes running." is said nowhere
    assert 2 <= summary["matched"] <= 3
    assert summary["recall"] == pytest.approx(100 * summary["matched"] / 4, abs=0.01)
    assert set(doc["per_conversation"]) == {"tiny"}
    assert doc["per_conversation"]["tiny"]["matched"] == summary["matched"]
    for side in ("faults_extracted", "faults_reference"):
        assert set(summary[side]["rates"]) == set(FAULTS)
    assert summary["faults_reference"]["counts"]["first_or_second_person"] == 0
    downstream = doc["downstream_recall_at_10"]
    assert downstream["this_extractor_from_dialogue"]["overall"]["recall"] == 75.0
    assert downstream["this_extractor_from_dialogue"]["per_conversation"] == {"tiny": 75.0}
    assert downstream["authors_facts"]["missing"] is True
    assert set(doc["sweep"]) == {"same_turn", "turns_1", "turns_2", "session"}
    assert doc["sweep"]["same_turn"]["0.60"]["matched"] == summary["matched"]
    assert set(doc["boundary"]) == {"kept", "dropped"}
    assert all(p["similarity"] >= 0.6 for p in doc["boundary"]["kept"])
    assert "overall" in done.stdout and "missing" in done.stdout


def test_bench_extract_refuses_an_unknown_conversation(tmp_path: Path) -> None:
    conversations, facts, _ = _data(tmp_path)
    done = run(
        tmp_path / "data", "bench", "extract", "--conversations", str(conversations),
        "--facts", str(facts), "--only", "nope", "--out", str(tmp_path / "x.json"),
    )  # fmt: skip
    assert done.returncode == 2 and "no conversation named 'nope'" in done.stderr
