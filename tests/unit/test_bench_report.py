import json
from pathlib import Path
from typing import Any

import pytest

from bench.report import (
    PAPER_TABLE2,
    load_results,
    plot_recall,
    render_markdown,
    write_report,
)
from common.errors import InvalidInput

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def result(variant: str, base: float, **over: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "benchmark": "locomo",
        "variant": variant,
        "k": 10,
        "command": f"atommem bench locomo --variant {variant}",
        "summary": {
            "single_hop": {"recall": base + 1.111, "questions": 563},
            "multi_hop": {"recall": base + 2.0, "questions": 192},
            "temporal": {"recall": base + 3.456, "questions": 214},
            "open_domain": {"recall": base + 4.0, "questions": 66},
            "overall": {"recall": base, "questions": 1035},
        },
        "latency_ms": {
            "total": {"p50": 39.1, "p95": 50.2, "max": 300.0},
            "graph": {"p50": 3.25, "p95": 7.5, "max": 20.0},
        },
        "ingest": {"conversations": 7, "facts": 4397, "seconds": 85.5, "facts_per_s": 51.4},
        "questions": [],
    }
    doc.update(over)
    return doc


def write(tmp_path: Path, name: str, doc: Any) -> Path:
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc), encoding="utf-8")
    return path


@pytest.fixture
def two_files(tmp_path: Path) -> list[Path]:
    flat = result("flat", 60.0, latency_ms={"total": {"p50": 12.0, "p95": 15.5}})
    return [write(tmp_path, "full.json", result("full", 66.84)), write(tmp_path, "flat.json", flat)]


def test_load_results_reads_files(two_files: list[Path]) -> None:
    results = load_results(two_files)
    assert [r["variant"] for r in results] == ["full", "flat"]


def test_load_results_rejects_bad_json(tmp_path: Path) -> None:
    path = write(tmp_path, "broken.json", "{not json")
    with pytest.raises(InvalidInput, match="broken.json"):
        load_results([path])


@pytest.mark.parametrize("key", ["summary", "variant"])
def test_load_results_requires_keys(tmp_path: Path, key: str) -> None:
    doc = result("full", 50.0)
    del doc[key]
    path = write(tmp_path, "partial.json", doc)
    with pytest.raises(InvalidInput, match=rf"partial\.json.*{key}"):
        load_results([path])


def test_render_markdown_numbers_and_sections(two_files: list[Path]) -> None:
    md = render_markdown(load_results(two_files))
    assert "Recall@10" in md
    assert "| full | 67.95 | 68.84 | 70.30 | 70.84 | 66.84 | 1035 |" in md
    assert "| flat | 61.11 | 62.00 | 63.46 | 64.00 | 60.00 | 1035 |" in md
    for name, row in PAPER_TABLE2.items():
        assert name in md
        assert f"{row['single_hop']:.2f}" in md
    assert "| *paper FLAT* | 72.18 | 41.75 | 79.89 | 42.46 | — | — |" in md
    assert "## Latency (ms)" in md
    assert "| full | 39.10 | 50.20 | — | — | 3.25 | 7.50 |" in md  # no lexical timing here
    assert "| flat | 12.00 | 15.50 | — | — | — | — |" in md
    assert "51.40" in md
    assert "atommem bench locomo --variant full" in md
    assert "```" in md
    # no file stem when variants are distinct
    assert "full (full)" not in md


def test_render_markdown_disambiguates_shared_variant(tmp_path: Path) -> None:
    paths = [
        write(tmp_path, "run_a.json", result("full", 60.0)),
        write(tmp_path, "run_b.json", result("full", 61.0, k=5)),
    ]
    md = render_markdown(load_results(paths))
    assert "full (run_a)" in md
    assert "full (run_b)" in md


def test_plot_recall_writes_png(two_files: list[Path], tmp_path: Path) -> None:
    out = tmp_path / "chart.png"
    plot_recall(load_results(two_files), out)
    assert out.read_bytes()[:8] == PNG_MAGIC


def test_write_report(two_files: list[Path], tmp_path: Path) -> None:
    md_path, png_path = write_report(two_files, tmp_path / "out")
    assert md_path.name == "report.md"
    assert png_path.name == "recall_by_category.png"
    assert "paper AtomMem (full)" in md_path.read_text(encoding="utf-8")
    assert png_path.read_bytes()[:8] == PNG_MAGIC


def test_answers_and_llm_usage_are_reported_when_present() -> None:
    answered = result("full", 60.0)
    answered["summary"]["multi_hop"].update(f1=12.5, bleu1=8.25, judge=40.0)
    answered["summary"]["overall"].update(f1=10.0, bleu1=7.0, judge=30.0)
    answered["ingest"]["llm"] = {
        "per_turn": {
            "calls": 2.5,
            "skipped": 1.25,
            "prompt_tokens": 900.0,
            "completion_tokens": 80.0,
        }
    }
    answered["llm_per_question"] = {
        "per_question": {
            "calls": 2.0,
            "skipped": 0.0,
            "prompt_tokens": 700.0,
            "completion_tokens": 30.0,
        }
    }
    text = render_markdown([answered, result("flat", 50.0)])
    assert "## Answers (%)" in text
    assert "| full | F1 | — | 12.50 | — | — | 10.00 |" in text
    assert "| full | J | — | 40.00 | — | — | 30.00 |" in text
    assert "| full | ingest, per turn | 2.50 | 1.25 | 900.00 | 80.00 |" in text
    assert "| full | queries, per question | 2.00 | 0.00 | 700.00 | 30.00 |" in text
    assert "flat | F1" not in text  # a result without answers adds no rows


def test_no_answer_or_llm_sections_without_them() -> None:
    text = render_markdown([result("full", 60.0)])
    assert "## Answers" not in text and "## LLM calls" not in text


def test_folds_are_scored_from_the_question_rows() -> None:
    def row(conv: str, category: int, recall: float) -> dict[str, object]:
        return {"conversation": conv, "category": category, "recall": recall}

    result = {
        "variant": "full",
        "summary": {"overall": {"recall": 50.0, "questions": 4}},
        "questions": [row("c1", 4, 1.0), row("c1", 1, 0.5), row("c2", 4, 0.0), row("c3", 2, 1.0)],
        "_source": "full.json",
    }
    md = render_markdown([result], {"A": ["c1"], "B": ["c2", "c3"]})
    assert "## Fold A: c1" in md and "## Fold B: c2, c3" in md
    assert "| full | 100.00 | 50.00 | — | — | 75.00 | 2 |" in md
    assert "| full | 0.00 | — | 100.00 | — | 50.00 | 2 |" in md
    with pytest.raises(InvalidInput, match="no question of fold C"):
        render_markdown([result], {"C": ["c9"]})


def test_a_fold_of_a_run_that_answered_also_shows_its_f1() -> None:
    def row(conv: str, category: int, recall: float, f1: float) -> dict[str, object]:
        return {"conversation": conv, "category": category, "recall": recall, "f1": f1}

    result = {
        "variant": "full",
        "summary": {"overall": {"recall": 50.0, "questions": 3, "f1": 20.0}},
        "questions": [row("c1", 4, 1.0, 0.5), row("c1", 1, 0.5, 0.1), row("c2", 4, 0.0, 0.0)],
        "_source": "full.json",
    }
    md = render_markdown([result], {"A": ["c1"]})
    assert "| full | 100.00 | 50.00 | — | — | 75.00 | 2 |" in md
    assert "| full (F1) | 50.00 | 10.00 | — | — | 30.00 | 2 |" in md
