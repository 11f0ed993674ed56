"""LongMemEval's retrieval scores as its official scorer defines them, on hand-computed cases;
the official files' schema held to with errors that name the question and field; and
`atommem bench longmemeval` end to end on a six-question file in that schema."""

from __future__ import annotations

import json
import math
import os
import subprocess
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from bench.longmemeval import load_questions, score, summarize
from bench.metrics import dcg, first_seen, retrieval_scores
from common.errors import InvalidInput
from common.models.memory import FactTime
from common.models.query import SearchHit
from tests.helpers.cli import run
from tests.helpers.samples import TINY_LONGMEMEVAL

K_KEYS = [f"{m}@{k}" for k in (1, 3, 5, 10) for m in ("recall_any", "recall_all", "ndcg_any")]


def hit(session_id: str, *turn_ids: str) -> SearchHit:
    return SearchHit(
        fact_id=f"f-{session_id}-{'-'.join(turn_ids)}",
        text="a fact",
        score=0.5,
        stages={},
        turn_ids=list(turn_ids),
        session_id=session_id,
        time=FactTime(session=datetime(2023, 5, 20)),
    )


def official() -> list[dict[str, Any]]:
    loaded: list[dict[str, Any]] = json.loads(TINY_LONGMEMEVAL.read_text(encoding="utf-8"))
    return loaded


def write(tmp_path: Path, doc: Any) -> Path:
    path = tmp_path / "longmemeval_s.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


# -- the metrics ----------------------------------------------------------------------------


def test_dcg_weighs_ranks_one_and_two_alike_then_discounts_by_log2_of_the_rank() -> None:
    assert dcg([1.0, 1.0, 1.0], 3) == pytest.approx(1 + 1 + 1 / math.log2(3))
    assert dcg([0.0, 1.0], 10) == 1.0  # rank 2 over log2(2) = 1
    assert dcg([0.0, 0.0, 0.0, 1.0], 10) == pytest.approx(0.5)  # rank 4 over log2(4)
    assert dcg([1.0, 1.0, 1.0], 1) == 1.0
    assert dcg([], 5) == 0.0


def test_recall_any_all_and_ndcg_at_k_by_hand() -> None:
    ranked = ["a", "x", "b", "y"]
    gold = {"a", "b"}
    assert retrieval_scores(ranked, gold, 1) == {
        "recall_any@1": 1.0, "recall_all@1": 0.0, "ndcg_any@1": 1.0,
    }  # fmt: skip
    at3 = retrieval_scores(ranked, gold, 3)
    assert (at3["recall_any@3"], at3["recall_all@3"]) == (1.0, 1.0)
    # (1 + 0 + 1/log2 3) against the ideal (1 + 1)
    assert at3["ndcg_any@3"] == pytest.approx((1 + 1 / math.log2(3)) / 2)
    # a miss at the top, the gold at rank 2: no discount there, so NDCG is still 1
    assert retrieval_scores(["x", "a"], {"a"}, 5)["ndcg_any@5"] == 1.0
    # the gold at rank 3: 1/log2(3)
    assert retrieval_scores(["x", "y", "a"], {"a"}, 5)["ndcg_any@5"] == pytest.approx(
        1 / math.log2(3)
    )
    # more gold than k: the ideal holds k of them
    many = retrieval_scores(["a", "x"], {"a", "b", "c"}, 2)
    assert many == {"recall_any@2": 1.0, "recall_all@2": 0.0, "ndcg_any@2": 0.5}
    # every gold id missed
    assert retrieval_scores(["x", "y"], {"a"}, 10) == {
        "recall_any@10": 0.0, "recall_all@10": 0.0, "ndcg_any@10": 0.0,
    }  # fmt: skip
    # nothing retrieved, and no gold at all: the official conventions
    assert retrieval_scores([], {"a"}, 3)["recall_any@3"] == 0.0
    assert retrieval_scores(["x"], set(), 3) == {
        "recall_any@3": 0.0, "recall_all@3": 1.0, "ndcg_any@3": 0.0,
    }  # fmt: skip


def test_items_rank_where_they_first_appear() -> None:
    assert first_seen([["s1"], ["s2", "s1"], ["s3"], ["s2"]]) == ["s1", "s2", "s3"]
    assert first_seen([]) == []


# -- gold and ranking of one question -----------------------------------------------------


def test_gold_is_derived_from_answer_ids_and_user_turns_with_has_answer(tmp_path: Path) -> None:
    items = {i.question.question_id: i.question for i in load_questions(TINY_LONGMEMEVAL)}
    assert items["ms_0002"].gold() == {
        "session": {"answer_ms_0002_1", "answer_ms_0002_2"},
        "turn": {"answer_ms_0002_1_1", "answer_ms_0002_2_1"},
    }
    # the assistant said the answer: no user turn holds it, so no gold, as in the scorer
    assert items["ssa_0004"].gold() == {"session": set(), "turn": set()}
    doc = official()
    # has_answer outside a session whose id holds "answer" marks nothing
    doc[0]["haystack_sessions"][0][0]["has_answer"] = True
    (first, *_) = load_questions(write(tmp_path, doc))
    assert first.question.gold()["turn"] == {"answer_ssu_0001_1_1"}


def test_facts_rank_sessions_and_user_turns() -> None:
    (item,) = load_questions(TINY_LONGMEMEVAL, ["ms_0002"])
    hits = [
        hit("ultrachat_bb02", "ultrachat_bb02_2"),  # an assistant turn: not in the turn corpus
        hit("answer_ms_0002_2", "answer_ms_0002_2_1"),
        hit("ultrachat_bb02", "ultrachat_bb02_1"),
        hit("answer_ms_0002_2", "answer_ms_0002_2_1", "answer_ms_0002_2_2"),
        hit("answer_ms_0002_1", "answer_ms_0002_1_1"),
    ]
    scored = score(item.question, hits)
    assert scored["ranked"] == {
        "session": ["ultrachat_bb02", "answer_ms_0002_2", "answer_ms_0002_1"],
        "turn": ["answer_ms_0002_2_1", "ultrachat_bb02_1", "answer_ms_0002_1_1"],
    }
    session, turn = scored["metrics"]["session"], scored["metrics"]["turn"]
    assert list(session) == K_KEYS
    assert (session["recall_any@1"], session["recall_any@3"], session["recall_all@3"]) == (0, 1, 1)
    # gold at ranks 2 and 3 of sessions: (1 + 1/log2 3) / 2
    assert session["ndcg_any@3"] == pytest.approx((1 + 1 / math.log2(3)) / 2)
    # gold at ranks 1 and 3 of turns: the same sum
    assert (turn["recall_any@1"], turn["recall_all@1"]) == (1.0, 0.0)
    assert turn["ndcg_any@3"] == pytest.approx((1 + 1 / math.log2(3)) / 2)
    assert score(item.question, [])["metrics"]["turn"]["recall_any@10"] == 0.0


# -- the file -------------------------------------------------------------------------------


def test_each_haystack_becomes_a_space_of_sessions_in_time_order() -> None:
    items = load_questions(TINY_LONGMEMEVAL)
    assert [i.question.question_id for i in items] == [
        "ssu_0001", "ms_0002", "ku_0003", "ssa_0004", "tr_0005", "ssu_0006_abs",
    ]  # fmt: skip
    assert [i.question.abstention for i in items] == [False] * 5 + [True]
    ku = items[2]
    assert ku.space.name == "ku_0003" and ku.asked_at == datetime(2023, 8, 1, 12, 0)
    sessions = ku.space.sessions.sessions
    # the file lists the July session first; it commits after the March one
    assert [(s.session_id, s.seq) for s in sessions] == [
        ("answer_ku_0003_1", 0), ("answer_ku_0003_2", 1),
    ]  # fmt: skip
    assert sessions[0].started_at == datetime(2023, 3, 3, 11, 0)
    assert [(t.id, t.speaker) for t in sessions[0].turns] == [
        ("answer_ku_0003_1_1", "User"), ("answer_ku_0003_1_2", "Assistant"),
    ]  # fmt: skip
    assert [i.question.question_id for i in load_questions(TINY_LONGMEMEVAL, limit=2)] == [
        "ssu_0001", "ms_0002",
    ]  # fmt: skip


def _broken(tmp_path: Path, change: Any) -> Path:
    doc = official()
    change(doc)
    return write(tmp_path, doc)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda d: d[1].pop("answer_session_ids"),
            r"\[1\] \(ms_0002\): answer_session_ids: Field required",
        ),
        (
            lambda d: d[0].update(question_id=7),
            r"\[0\]: question_id: Input should be a valid string",
        ),
        (
            lambda d: d[0]["haystack_sessions"][1][0].update(has_answer="yes"),
            r"\(ssu_0001\): haystack_sessions\.1\.0\.has_answer: Input should be a valid boolean",
        ),
        (
            lambda d: d[0]["haystack_sessions"][1][0].update(role="system"),
            r"haystack_sessions\.1\.0\.role: Input should be 'user' or 'assistant'",
        ),
        (lambda d: d[2]["haystack_dates"].pop(), "ku_0003.*differ in length"),
        (
            lambda d: d[2].update(question_date="1 August 2023"),
            "ku_0003.*question_date: date '1 August 2023' is not like '2023/05/20 \\(Sat\\) 02:21'",
        ),
        (lambda d: d[1].update(question_id="ssu_0001"), "question_id 'ssu_0001' appears twice"),
        (lambda d: d[1].update(question_id="ms 2"), r"\(ms 2\): question_id is the space's name"),
        (
            lambda d: d[1]["haystack_session_ids"].__setitem__(1, "answer_ms_0002_1"),
            "haystack session 'answer_ms_0002_1' appears twice",
        ),
    ],
)  # fmt: skip
def test_a_malformed_file_is_refused_naming_the_question_and_field(
    tmp_path: Path, change: Any, message: str
) -> None:
    with pytest.raises(InvalidInput, match=message) as refused:
        load_questions(_broken(tmp_path, change))
    assert str(tmp_path / "longmemeval_s.json") in str(refused.value)


def test_a_file_that_is_no_question_list_or_lacks_a_question_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="expected a JSON list of questions"):
        load_questions(write(tmp_path, {"question_id": "x"}))
    with pytest.raises(InvalidInput, match="no questions"):
        load_questions(write(tmp_path, []))
    with pytest.raises(InvalidInput, match="no question_id 'nope'"):
        load_questions(TINY_LONGMEMEVAL, ["nope"])
    with pytest.raises(InvalidInput, match="no such file"):
        load_questions(tmp_path / "missing.json")


# -- the summary ----------------------------------------------------------------------------


def _row(qid: str, qtype: str, value: float, **extra: Any) -> dict[str, Any]:
    metrics = {level: dict.fromkeys(K_KEYS, value) for level in ("session", "turn")}
    gold = {"session": ["s"], "turn": ["s_1"]}
    return {"question_id": qid, "question_type": qtype, "abstention": "_abs" in qid,
            "gold": gold, "metrics": metrics, **extra}  # fmt: skip


def test_abstentions_are_left_out_of_the_retrieval_means_per_type_and_overall() -> None:
    rows = [
        _row("a", "multi-session", 1.0, f1=1.0),
        _row("b", "multi-session", 0.0, f1=0.5),
        _row("c_abs", "multi-session", 0.0, f1=0.0),
        _row("d", "temporal-reasoning", 1.0, f1=1.0),
        _row("e", "a-new-type", 0.0, f1=0.0),
    ]
    summary = summarize(rows)
    assert list(summary) == ["multi-session", "temporal-reasoning", "a-new-type", "overall"]
    multi = summary["multi-session"]
    assert (multi["questions"], multi["abstention"], multi["no_gold_session"]) == (2, 1, 0)
    assert multi["session"]["recall_all@5"] == 50.0 and multi["turn"]["ndcg_any@10"] == 50.0
    assert multi["f1"] == 50.0  # F1 counts every answered question
    assert "judge" not in multi
    overall = summary["overall"]
    assert (overall["questions"], overall["abstention"]) == (4, 1)
    assert overall["session"]["recall_any@1"] == 50.0
    only_abs = summarize([_row("x_abs", "single-session-user", 1.0)])
    assert only_abs["single-session-user"]["session"]["recall_any@1"] is None


# -- the command ----------------------------------------------------------------------------


def bench(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`atommem bench longmemeval` on the fixture, embedded whatever this shell configures."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ATOMMEM_")}
    data = ("--data", str(TINY_LONGMEMEVAL))
    return run(tmp_path / "data", "bench", "longmemeval", *data, *args, env=env)


@pytest.mark.integration  # the real embedding model; embedded, no Redis
def test_bench_longmemeval_end_to_end_on_the_fixture(tmp_path: Path) -> None:
    out = tmp_path / "results" / "lme.json"
    done = bench(tmp_path, "--k", "10", "--answer", "--out", str(out))
    assert done.returncode == 0, done.stderr
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["benchmark"] == "longmemeval" and doc["variant"] == "full" and doc["k"] == 10
    assert doc["data"] == str(TINY_LONGMEMEVAL)
    assert doc["settings"]["llm_backend"] == "rules"
    assert doc["ingest"]["spaces"] == 6 and doc["ingest"]["sessions"] == 12
    summary = doc["summary"]
    assert (summary["overall"]["questions"], summary["overall"]["abstention"]) == (5, 1)
    assert summary["overall"]["no_gold_session"] == 1  # the assistant's answer
    assert summary["single-session-user"]["questions"] == 1
    assert summary["single-session-user"]["abstention"] == 1
    assert "f1" in summary["overall"]
    rows = {r["question_id"]: r for r in doc["questions"]}
    # the scores in the file are what each row's ranking and gold give
    for row in rows.values():
        for level in ("session", "turn"):
            for k in (1, 3, 5, 10):
                expected = retrieval_scores(row["ranked"][level], set(row["gold"][level]), k)
                got = {key: row["metrics"][level][key] for key in expected}
                assert got == pytest.approx(expected)
        assert 0 < len(row["retrieved"]) <= 10 and "f1" in row
        assert {"fact_id", "text", "dia_ids", "score", "session_id"} <= set(row["retrieved"][0])
    # the one evidence turn is retrieved from a two-session haystack
    assert rows["ssu_0001"]["metrics"]["turn"]["recall_any@3"] == 1.0
    assert "question type" in done.stdout and "overall" in done.stdout
    again = bench(tmp_path, "--out", str(out))
    assert again.returncode == 2 and "already exists" in again.stderr
    reused = bench(tmp_path, "--k", "10", "--reuse", "--out", str(out))
    assert reused.returncode == 0, reused.stderr
    again_doc = json.loads(out.read_text(encoding="utf-8"))
    # the spaces queried again without an ingest: the same rankings
    assert again_doc["summary"]["overall"]["session"] == summary["overall"]["session"]
    assert again_doc["ingest"]["spaces"] == 6 and again_doc["ingest"]["seconds"] is None
