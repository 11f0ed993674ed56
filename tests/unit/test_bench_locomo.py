"""Recall@k as DESIGN §8 defines it, on a tiny hand-made LoCoMo-format conversation."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from bench.locomo import (
    check_variants,
    load_conversations,
    result_document,
    run_hybrid_bm25,
    run_raw_turns,
    summarize,
)
from bench.metrics import bleu1, f1, percentiles, recall_at_k
from common.errors import InvalidInput
from common.settings import SimilaritySettings
from common.store.space_index import SpaceIndex
from tests.helpers.records import stored_fact

CONVERSATION = {
    "sample_id": "tiny",
    "conversation": {
        "speaker_a": "Ana",
        "speaker_b": "Ben",
        "session_1_date_time": "1:00 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ana", "dia_id": "D1:1", "text": "I adopted a cat named Miso."},
            {"speaker": "Ben", "dia_id": "D1:2", "text": "I am training for a marathon."},
        ],
        "session_2_date_time": "2:00 pm on 20 May, 2023",
        "session_2": [
            {"speaker": "Ana", "dia_id": "D2:1", "text": "Miso the cat broke a vase."},
            {"speaker": "Ben", "dia_id": "D2:2", "text": "The marathon is in Boston."},
        ],
    },
    "qa": [
        {"question": "cat", "answer": "Miso", "evidence": ["D1:1", "D2:1"], "category": 1},
        {"question": "marathon", "answer": "Boston", "evidence": ["D2:2"], "category": 4},
        {"question": "vase", "answer": "broke", "evidence": ["D2:1", "D9:9"], "category": 2},
        {"question": "ignored", "answer": "x", "evidence": ["D1:1"], "category": 5},
        {"question": "ally", "answer": "likely yes", "evidence": [], "category": 3},
    ],
}

WORDS = ["cat", "miso", "marathon", "boston", "vase"]


def encode(texts: list[str]) -> np.ndarray:
    """A bag of the five words above: turns rank by the words they share with the question."""
    out = np.zeros((len(texts), len(WORDS)))
    for i, text in enumerate(texts):
        lowered = text.lower()
        for j, word in enumerate(WORDS):
            out[i, j] = lowered.count(word)
    return out


@pytest.fixture
def conv_dir(tmp_path: Path) -> Path:
    (tmp_path / "tiny.json").write_text(json.dumps(CONVERSATION), encoding="utf-8")
    return tmp_path


def test_recall_counts_covered_evidence_of_the_first_k_items() -> None:
    retrieved = [["D1:1"], ["D3:3", "D1:1"], ["D2:1"]]
    assert recall_at_k(["D1:1", "D2:1"], retrieved, k=3) == 1.0
    assert recall_at_k(["D1:1", "D2:1"], retrieved, k=2) == 0.5
    assert recall_at_k(["D1:1", "D1:1"], retrieved, k=1) == 1.0  # evidence ids are a set
    assert recall_at_k(["D:1:1"], retrieved, k=3) == 0.0  # malformed ids are missed, as given
    # No evidence: nothing to miss, so full recall (the paper's reference scorer does the same)
    assert recall_at_k([], retrieved, k=3) == 1.0
    assert recall_at_k([""], retrieved, k=3) == 1.0
    assert recall_at_k([], [], k=3) == 1.0


def test_recall_on_a_tiny_conversation(conv_dir: Path) -> None:
    (conv,) = load_conversations(conv_dir, None)
    assert conv.name == "tiny"
    assert [i for i, _ in conv.questions] == [0, 1, 2, 4]  # category 5 is not scored
    rows, stages = run_raw_turns(encode, [conv], k=1, quiet=True)
    # k=1; ties keep turn order: "cat" -> D1:1, "marathon" -> D1:2, "vase" -> D2:1
    assert [r["retrieved"][0]["dia_ids"] for r in rows[:3]] == [["D1:1"], ["D1:2"], ["D2:1"]]
    assert [r["recall"] for r in rows] == [0.5, 0.0, 0.5, 1.0]  # no evidence: nothing missed
    assert set(stages) == {"embedding", "primary", "total"}

    rows2, _ = run_raw_turns(encode, [conv], k=2, quiet=True)
    assert [r["recall"] for r in rows2] == [1.0, 1.0, 0.5, 1.0]
    summary = summarize(rows2)
    assert summary["multi_hop"] == {"questions": 1, "recall": 100.0}
    assert summary["single_hop"] == {"questions": 1, "recall": 100.0}
    assert summary["temporal"] == {"questions": 1, "recall": 50.0}
    # the question without evidence is counted, in its category and overall, at full recall
    assert summary["open_domain"] == {"questions": 1, "recall": 100.0}
    assert summary["overall"] == {"questions": 4, "recall": round(100 * 3.5 / 4, 2)}

    doc = result_document("raw-turns", 2, "cmd", rows2, {"total": [1.0, 3.0]}, None, {})
    assert doc["latency_ms"]["total"] == {"p50": 1.0, "p95": 3.0, "max": 3.0}
    first = doc["questions"][0]
    assert (first["conversation"], first["index"], first["category"]) == ("tiny", 0, 1)
    assert {"fact_id", "text", "dia_ids", "score"} <= set(first["retrieved"][0])


def test_bad_inputs_are_refused_with_the_file_named(tmp_path: Path) -> None:
    (tmp_path / "x.json").write_text(json.dumps({"qa": []}), encoding="utf-8")
    with pytest.raises(InvalidInput, match="x.json: not a LoCoMo conversation"):
        load_conversations(tmp_path, None)
    (tmp_path / "x.json").write_text(json.dumps(CONVERSATION), encoding="utf-8")
    with pytest.raises(InvalidInput, match="no pre-extracted facts"):
        load_conversations(tmp_path, tmp_path / "facts")
    with pytest.raises(InvalidInput, match="unknown variant"):
        check_variants(["fulll"])
    assert check_variants([]) == [
        "full",
        "flat",
        "no-graph",
        "no-profile",
        "hybrid-bm25",
        "raw-turns",
    ]
    with pytest.raises(InvalidInput, match="no conversation named 'conv-99'"):
        load_conversations(tmp_path, None, ["conv-99"])
    assert [c.name for c in load_conversations(tmp_path, None, ["x"])] == ["x"]


def test_answer_scores() -> None:
    assert f1("The cat Miso", "miso") == pytest.approx(2 * 0.5 * 1 / 1.5)
    assert f1("", "miso") == 0.0
    assert bleu1("miso", "miso") == 1.0
    # one of two predicted tokens right, prediction as long as the reference: no penalty
    assert bleu1("miso dog", "miso cat") == 0.5
    # shorter than the reference: brevity penalty exp(1 - 2/1)
    assert bleu1("miso", "miso cat") == pytest.approx(np.exp(-1.0))
    assert percentiles([]) == {"p50": 0.0, "p95": 0.0, "max": 0.0}


def test_llm_summary_totals_and_rates() -> None:
    from bench.locomo import llm_summary

    counts = {
        "llm.extract.calls": 6,
        "llm.extract.prompt_tokens": 1200,
        "llm.extract.completion_tokens": 300,
        "llm.extract.skipped": 2,
        "llm.verify.calls": 2,
        "llm.verify.prompt_tokens": 400,
        "llm.verify.completion_tokens": 20,
        "llm.prompt_tokens": 1600,  # totals are recomputed, not double counted
    }
    out = llm_summary(counts, 4, "per_turn")
    assert out is not None
    assert out["total"] == {
        "calls": 8, "skipped": 2, "prompt_tokens": 1600, "completion_tokens": 320,
    }  # fmt: skip
    assert out["per_turn"]["calls"] == 2.0 and out["per_turn"]["prompt_tokens"] == 400.0
    assert out["by_stage"]["verify"]["calls"] == 2
    assert llm_summary({"llm.verify.skipped": 3}, 4, "per_turn") is None  # no model called


def test_hybrid_bm25_fuses_dense_and_bm25_ranks(conv_dir: Path) -> None:
    (conv,) = load_conversations(conv_dir, None)
    index = SpaceIndex(tenant="t", space="tiny", dimension=len(WORDS))
    texts = {
        "f1": ("Ana adopted a cat named Miso.", "D1:1"),
        "f2": ("Ben is training for a marathon.", "D1:2"),
        "f3": ("Miso the cat broke a vase.", "D2:1"),
        "f4": ("The marathon is in Boston.", "D2:2"),
    }
    for fid, (text, turn) in texts.items():
        index.put_fact(stored_fact(fid, text, turn=turn, space="tiny"), encode([text])[0])
    ctx = SimpleNamespace(index=lambda t, s: index, embedder=SimpleNamespace(encode=encode))
    rows, stages = run_hybrid_bm25(ctx, "t", [conv], 2, True, SimilaritySettings())  # type: ignore
    assert set(stages) == {"embedding", "primary", "total"}
    # "vase": dense ranks f3 (the only vase), then f1, f2, f4 in row order; BM25 finds only
    # f3. Fused: f3 1/61 + 1/61, f1 1/62.
    vase = rows[2]
    assert [r["fact_id"] for r in vase["retrieved"]] == ["f3", "f1"]
    assert [r["score"] for r in vase["retrieved"]] == [round(2 / 61, 6), round(1 / 62, 6)]
    assert vase["recall"] == 0.5  # D2:1 of D2:1 and D9:9
    # "cat": dense ties f1 and f3 (one cat each), BM25 ties them too: row order keeps f1 first
    assert [r["dia_ids"] for r in rows[0]["retrieved"]] == [["D1:1"], ["D2:1"]]
    assert rows[0]["recall"] == 1.0
