"""`atommem bench longmemeval`: LongMemEval's retrieval scores per question type (session- and
turn-level recall_any, recall_all and NDCG at k = 1, 3, 5, 10, scored as the benchmark's own
retrieval scorer scores them), and with a model F1 and the judge's J, for one recall variant
run through the production task graph and query worker.

Each question brings its own haystack of sessions; each haystack becomes its own space, named
after the question id, built by the same ingest jobs `bench locomo` sends. Memory returns
facts, each traced to its session and turns: a session (or turn) ranks where its first fact
ranks, and the scores read that ranking.

The data (`longmemeval_oracle.json`, `longmemeval_s.json`, `longmemeval_m.json`) lives on the
Hugging Face hub, dataset xiaowu0162/longmemeval ("LongMemEval: Benchmarking Chat Assistants
on Long-Term Interactive Memory", Wu et al., ICLR 2025).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator
from tqdm import tqdm

from bench.locomo import Conversation, hit_row, query
from bench.metrics import f1, first_seen, retrieval_scores
from common.errors import InvalidInput
from common.inputs.formats import SpaceInput, checked_session, explain, load_json
from common.models.api import SPACE_NAME, SPACE_NAME_RULE
from common.models.query import AskResponse, SearchHit
from common.models.session import SessionInput, Turn

DATA_URL = "https://huggingface.co/datasets/xiaowu0162/longmemeval"
# The dates of the official files, e.g. "2023/05/20 (Sat) 02:21".
DATE_FORMAT = "%Y/%m/%d (%a) %H:%M"
KS = (1, 3, 5, 10)
LEVELS = ("session", "turn")
# The official question types, in the order summaries list them; others follow as found.
QUESTION_TYPES = (
    "single-session-user",
    "single-session-assistant",
    "single-session-preference",
    "multi-session",
    "knowledge-update",
    "temporal-reasoning",
)
SPEAKERS = {"user": "User", "assistant": "Assistant"}


class HaystackTurn(BaseModel):
    """One turn of a haystack session; `has_answer` marks the turns holding the evidence."""

    model_config = ConfigDict(strict=True)

    role: Literal["user", "assistant"]
    content: str
    has_answer: bool | None = None


class Question(BaseModel):
    """One entry of an official file: the question and the haystack it is asked over."""

    model_config = ConfigDict(strict=True)

    question_id: str
    question_type: str
    question: str
    answer: str | int | float
    question_date: str
    haystack_session_ids: list[str]
    haystack_dates: list[str]
    haystack_sessions: list[list[HaystackTurn]]
    answer_session_ids: list[str]

    @model_validator(mode="after")
    def _aligned(self) -> Question:
        lengths = {
            len(self.haystack_session_ids),
            len(self.haystack_dates),
            len(self.haystack_sessions),
        }
        if len(lengths) > 1:
            raise ValueError(
                "haystack_session_ids, haystack_dates and haystack_sessions differ in length"
            )
        seen: set[str] = set()
        for session_id in self.haystack_session_ids:
            if session_id in seen:
                raise ValueError(f"haystack session {session_id!r} appears twice")
            seen.add(session_id)
        return self

    @property
    def abstention(self) -> bool:
        """An abstention question (its id holds `_abs`): the answer is not in the haystack,
        and the official scorer leaves it out of the retrieval means."""
        return "_abs" in self.question_id

    def haystack(self) -> list[tuple[str, str, list[HaystackTurn]]]:
        return list(
            zip(self.haystack_session_ids, self.haystack_dates, self.haystack_sessions, strict=True)
        )

    def gold(self) -> dict[str, set[str]]:
        """The evidence as the official scorer derives it from the ids: the user turns with
        `has_answer` in sessions whose id holds "answer", and the sessions holding one; an
        evidence session whose user turns have no answer (the assistant said it) counts as
        none, as there."""
        gold: dict[str, set[str]] = {"session": set(), "turn": set()}
        for session_id, _, turns in self.haystack():
            if "answer" not in session_id:
                continue
            for i, turn in enumerate(turns):
                if turn.role == "user" and turn.has_answer:
                    gold["session"].add(session_id)
                    gold["turn"].add(turn_id(session_id, i))
        return gold

    def user_turns(self) -> set[str]:
        """The turn-level corpus of the official scorer: every user turn (assistant turns are
        not ranked there, so a fact from one takes no place in the turn ranking)."""
        return {
            turn_id(session_id, i)
            for session_id, _, turns in self.haystack()
            for i, turn in enumerate(turns)
            if turn.role == "user"
        }


@dataclass
class Item:
    """A question ready to run: its space (the haystack as sessions) and when it is asked."""

    question: Question
    asked_at: datetime
    space: Conversation


def turn_id(session_id: str, index: int) -> str:
    """The official scorer's turn id: the session id and the turn's 1-based place in it."""
    return f"{session_id}_{index + 1}"


def parse_date(value: str, where: str) -> datetime:
    try:
        return datetime.strptime(value.strip(), DATE_FORMAT)
    except ValueError:
        raise InvalidInput(
            f"{where}: date {value!r} is not like '2023/05/20 (Sat) 02:21'"
        ) from None


def load_questions(path: Path, only: Sequence[str] = (), limit: int | None = None) -> list[Item]:
    """The questions of an official LongMemEval file (or those whose id is in `only`, then the
    first `limit`), validated in full, haystacks turned into sessions, before anything runs."""
    doc = load_json(path)
    if not isinstance(doc, list):
        raise InvalidInput(
            f"{path}: expected a JSON list of questions (longmemeval_oracle.json, "
            f"longmemeval_s.json, longmemeval_m.json from {DATA_URL})"
        )
    questions = []
    for i, raw in enumerate(doc):
        where = f"{path}: [{i}]"
        if isinstance(raw, dict) and isinstance(raw.get("question_id"), str):
            where += f" ({raw['question_id']})"
        try:
            questions.append((where, Question.model_validate(raw)))
        except ValidationError as exc:
            raise InvalidInput(f"{where}: {explain(exc)}") from None
    ids = [q.question_id for _, q in questions]
    repeated = sorted(i for i, n in Counter(ids).items() if n > 1)
    if repeated:
        raise InvalidInput(f"{path}: question_id {repeated[0]!r} appears twice")
    if only:
        missing = sorted(set(only) - set(ids))
        if missing:
            raise InvalidInput(f"{path}: no question_id {missing[0]!r}")
        questions = [(w, q) for w, q in questions if q.question_id in set(only)]
    if not questions:
        raise InvalidInput(f"{path}: no questions")
    return [_item(where, q) for where, q in questions[:limit]]


def _item(where: str, question: Question) -> Item:
    if not re.fullmatch(SPACE_NAME, question.question_id):
        raise InvalidInput(f"{where}: question_id is the space's name: {SPACE_NAME_RULE}")
    asked_at = parse_date(question.question_date, f"{where}: question_date")
    haystack = question.haystack()
    times = [parse_date(d, f"{where}: haystack_dates of {s}") for s, d, _ in haystack]
    # sessions commit in the order they were held, whatever the file's order
    order = sorted(range(len(haystack)), key=lambda i: (times[i], i))
    sessions: list[SessionInput] = []
    for seq, i in enumerate(order):
        session_id, _, turns = haystack[i]
        if not any(t.content.strip() for t in turns):
            continue  # nothing to remember; it stays in the corpus, never retrieved
        data = {
            "session_id": session_id,
            "started_at": times[i],
            "participants": list(SPEAKERS.values()),
            "turns": [
                Turn(id=turn_id(session_id, n), speaker=SPEAKERS[t.role], text=t.content)
                for n, t in enumerate(turns)
            ],
            "seq": seq,
        }
        sessions.append(checked_session(data, f"{where}: session {session_id}"))
    space = Conversation(
        name=question.question_id,
        questions=[(0, {"question": question.question})],
        sessions=SpaceInput(space=question.question_id, sessions=sessions),
        turns=[],
    )
    return Item(question, asked_at, space)


def score(question: Question, hits: Sequence[SearchHit]) -> dict[str, Any]:
    """The question's gold, the session and turn rankings its hits give (first ten of each)
    and the official scores of both at every k."""
    gold = question.gold()
    corpus = question.user_turns()
    ranked = {
        "session": first_seen([h.session_id] for h in hits),
        "turn": first_seen([t for t in h.turn_ids if t in corpus] for h in hits),
    }
    metrics: dict[str, dict[str, float]] = {}
    for level in LEVELS:
        metrics[level] = {}
        for k in KS:
            metrics[level].update(retrieval_scores(ranked[level], gold[level], k))
    return {
        "gold": {level: sorted(gold[level]) for level in LEVELS},
        "ranked": {level: ranked[level][: max(KS)] for level in LEVELS},
        "metrics": metrics,
    }


def run(
    client: Any,
    tenant: str,
    items: Sequence[Item],
    variant: str,
    k: int,
    answer: bool,
    quiet: bool,
    judge: Callable[[str, str, str], bool] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, list[float]]]:
    """Every question through the query worker in `variant` mode, asked at its question date,
    over its own space; with `judge`, each answer graded by the LLM judge."""
    rows: list[dict[str, Any]] = []
    stages: dict[str, list[float]] = {}
    for item in tqdm(items, desc=variant, unit="q", disable=quiet):
        q = item.question
        response = query(
            client, tenant, q.question_id, q.question, k, variant, answer, stages, item.asked_at
        )
        row: dict[str, Any] = {
            "question_id": q.question_id,
            "question_type": q.question_type,
            "question": q.question,
            "abstention": q.abstention,
            "answer_session_ids": q.answer_session_ids,
            **score(q, response.hits),
            "retrieved": [{**hit_row(h), "session_id": h.session_id} for h in response.hits],
        }
        if isinstance(response, AskResponse):
            reference = str(q.answer)
            row.update(
                answer=response.answer,
                reference=reference,
                f1=round(f1(response.answer, reference), 6),
            )
            if judge is not None:
                row["judge"] = int(judge(q.question, reference, response.answer))
        if response.llm_usage:
            row["llm_usage"] = response.llm_usage
        rows.append(row)
    return rows, stages


def metric_names() -> list[str]:
    return [f"{m}@{k}" for k in KS for m in ("recall_any", "recall_all", "ndcg_any")]


def summarize(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per question type present and overall: the retrieval scores in % averaged over the
    questions that are not abstentions (as the official scorer averages them), their count,
    the abstentions' and how many have no gold session (they score recall_all 100 and the
    rest 0, as there); F1 and J in % over every answered question, abstentions included."""
    groups: dict[str, list[dict[str, Any]]] = {name: [] for name in QUESTION_TYPES}
    for row in rows:
        groups.setdefault(row["question_type"], []).append(row)
    groups = {name: members for name, members in groups.items() if members}
    groups["overall"] = list(rows)
    out: dict[str, dict[str, Any]] = {}
    for name, members in groups.items():
        scored = [m for m in members if not m["abstention"]]
        entry: dict[str, Any] = {
            "questions": len(scored),
            "abstention": len(members) - len(scored),
            "no_gold_session": sum(not m["gold"]["session"] for m in scored),
        }
        for level in LEVELS:
            entry[level] = {
                metric: _percent([m["metrics"][level][metric] for m in scored])
                for metric in metric_names()
            }
        for metric in ("f1", "judge"):
            values = [m[metric] for m in members if metric in m]
            if values:
                entry[metric] = _percent(values)
        out[name] = entry
    return out


def _percent(values: Sequence[float]) -> float | None:
    return round(100 * sum(values) / len(values), 2) if values else None
