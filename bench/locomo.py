"""`atommem bench locomo`: Recall@k by LoCoMo category for the recall variants, side by side
with two plain baselines: dense retrieval over the raw turns, and dense + BM25 over the facts
memory holds fused by reciprocal rank (`hybrid-bm25`). The memory variants run through the
production task graph and query worker.

Each conversation gets its own space (named after the file), built by the same ingest jobs a
chat backend would send; every question of categories 1-4 then goes to the query queue with
the variant as the recall mode. Nothing here knows a particular conversation: any directory of
LoCoMo-format files works.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, get_args

import numpy as np
from tqdm import tqdm

from bench.ingest import embedded_batches, embedding_only, event_sizes, ingest_jobs
from bench.metrics import CATEGORIES, bleu1, f1, percentiles, recall_at_k
from common.context import MemoryContext
from common.errors import InvalidInput
from common.inputs.formats import SpaceInput, load_json, read_sessions
from common.llm import usage
from common.models.query import AskResponse, RecallMode, SearchHit, SearchResponse
from common.models.session import Turn
from common.settings import SimilaritySettings
from common.store import records
from common.text.lexical import query_terms

MEMORY_VARIANTS: tuple[str, ...] = get_args(RecallMode)
# Variants that read the memory the ingest built (the memory variants and hybrid-bm25).
STORED_VARIANTS = (*MEMORY_VARIANTS, "hybrid-bm25")
VARIANTS = (*STORED_VARIANTS, "raw-turns")
# Reciprocal rank fusion's constant in hybrid-bm25: the customary 60.
RRF_K = 60
STAGES = ("intent", "embedding", "lexical", "primary", "compensatory", "graph", "profiles", "total")


@dataclass
class Conversation:
    name: str  # the file stem, e.g. conv-26; also the space name
    questions: list[tuple[int, dict[str, Any]]]  # (position in the file's qa list, qa)
    sessions: SpaceInput  # what memory ingests: the dialogue, or its pre-extracted facts
    turns: list[tuple[str, str]]  # (dia_id, text) of every raw turn, for raw-turns


def turn_text(turn: Turn) -> str:
    text = f"{turn.speaker}: {turn.text}"
    return f"{text} [shares an image: {turn.image_caption}]" if turn.image_caption else text


def load_conversations(
    conversations: Path, facts: Path | None, only: Sequence[str] = ()
) -> list[Conversation]:
    """Every LoCoMo conversation under `conversations` (a file or a directory), or those
    whose file stem is in `only`, validated in full before anything is stored; with `facts`,
    the pre-extracted facts of the same name."""
    files = sorted(conversations.glob("*.json")) if conversations.is_dir() else [conversations]
    if not files:
        raise InvalidInput(f"{conversations}: no .json files")
    if only:
        missing = sorted(set(only) - {f.stem for f in files})
        if missing:
            raise InvalidInput(f"{conversations}: no conversation named {missing[0]!r}")
        files = [f for f in files if f.stem in set(only)]
    out = []
    for path in files:
        doc = load_json(path)
        if not isinstance(doc, dict) or "conversation" not in doc or "qa" not in doc:
            raise InvalidInput(f"{path}: not a LoCoMo conversation (needs 'conversation' and 'qa')")
        raw = read_sessions(path, "locomo")
        sessions = raw
        if facts is not None:
            facts_path = facts / path.name
            if not facts_path.exists():
                raise InvalidInput(f"{facts_path}: no pre-extracted facts for {path.name}")
            sessions = read_sessions(facts_path, "locomo-facts")
        questions = [
            (i, qa)
            for i, qa in enumerate(doc["qa"])
            if isinstance(qa, dict) and qa.get("category") in CATEGORIES
        ]
        turns = [(str(t.id), turn_text(t)) for s in raw.sessions for t in s.turns if t.id]
        out.append(Conversation(path.stem, questions, sessions, turns))
    return out


def ingest(
    client: Any,
    ctx: MemoryContext,
    tenant: str,
    conversations: Sequence[Conversation],
    quiet: bool,
) -> dict[str, Any]:
    """Submit every session of every conversation (one space each) and wait for the jobs;
    then, in the same process, time the embedding model alone over the facts the ingest
    embedded (pre-extracted facts only) as the floor for its rate."""
    store = ctx.store
    for conv in conversations:
        if records.get_space(store, tenant, conv.name) is not None:
            raise InvalidInput(
                f"space {conv.name!r} already exists in this store: the benchmark measures "
                "ingest into empty spaces; use a fresh --data-dir, or pass --reuse to query "
                "the existing memory without ingesting"
            )
    for conv in conversations:
        records.create_space(store, tenant, conv.name)
    items = [(conv.name, s) for conv in conversations for s in conv.sessions.sessions]
    seconds, spent = ingest_jobs(client, tenant, items, "ingest", quiet)
    out = counts(store, tenant, conversations, seconds)
    out["turns"] = spent.turns
    out["facts_in"] = spent.facts_in
    batches = embedded_batches(ctx, items)
    if batches is not None and spent.facts_in:
        floor = embedding_only(ctx.embedder.encode, batches)
        out.update(floor.as_fields(spent.facts_in, seconds))
    out["llm"] = llm_summary(spent.llm_usage, spent.turns, "per_turn")
    return out


def llm_summary(counts: dict[str, int], n: int, per: str) -> dict[str, Any] | None:
    """Model calls and tokens by stage, in total and per turn (or per question); None for
    the `rules` backend, which calls no model."""
    spent = usage.Usage.from_counts(counts)
    if not spent.total("calls"):
        return None
    keys = ("calls", "skipped", "prompt_tokens", "completion_tokens")
    by_stage = {stage: dict(c) for stage, c in sorted(spent.stages.items())}
    totals = {key: spent.total(key) for key in keys}
    return {
        "by_stage": by_stage,
        "total": totals,
        per: {key: round(value / n, 3) if n else None for key, value in totals.items()},
    }


def counts(
    store: Any, tenant: str, conversations: Sequence[Conversation], seconds: float | None
) -> dict[str, Any]:
    per_space = [records.space_counts(store, tenant, c.name) for c in conversations]
    totals = {name: sum(c[name] for c in per_space) for name in records.SPACE_KINDS}
    return {
        "conversations": len(conversations),
        **totals,
        "seconds": None if seconds is None else round(seconds, 2),
        "facts_per_s": None if not seconds else round(totals["facts"] / seconds, 2),
        "event_sizes": event_sizes(store, tenant, [c.name for c in conversations]),
    }


def run_memory_variant(
    client: Any,
    tenant: str,
    conversations: Sequence[Conversation],
    variant: str,
    k: int,
    answer: bool,
    quiet: bool,
    judge: Callable[[str, str, str], bool] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, list[float]]]:
    """Every question through the query worker in `variant` mode; with `judge`, each answer
    is also graded by the LLM judge (its calls are the benchmark's, not the system's)."""
    rows: list[dict[str, Any]] = []
    stages: dict[str, list[float]] = {}
    total = sum(len(c.questions) for c in conversations)
    bar = tqdm(total=total, desc=variant, unit="q", disable=quiet)
    for conv in conversations:
        for index, qa in conv.questions:
            response = query(client, tenant, conv.name, qa["question"], k, variant, answer, stages)
            retrieved = [hit_row(h) for h in response.hits]
            said = response.answer if isinstance(response, AskResponse) else None
            row = _row(conv, index, qa, retrieved, k, said)
            if response.llm_usage:
                row["llm_usage"] = response.llm_usage
            if judge is not None and "answer" in row:
                row["judge"] = int(judge(qa["question"], row["reference"], row["answer"]))
            rows.append(row)
            bar.update()
    bar.close()
    return rows, stages


def query(
    client: Any,
    tenant: str,
    space: str,
    question: str,
    k: int,
    variant: str,
    answer: bool,
    stages: dict[str, list[float]],
    as_of: datetime | None = None,
) -> SearchResponse:
    """One question through the query worker in `variant` mode (`ask` when `answer`), its
    time end to end and by stage added to `stages`."""
    started = time.perf_counter()
    response: SearchResponse
    # no relevance floor: Recall@k as the paper scores it (bench.relevance_floor reports what
    # `retrieval.min_relevance` keeps of it)
    if answer:
        response = client.ask(
            tenant, space, question, k=k, mode=variant, min_score=0.0, as_of=as_of
        )
    else:
        response = client.search(
            tenant, space, question, k=k, mode=variant, min_score=0.0, as_of=as_of
        )
    stages.setdefault("through_query_worker", []).append((time.perf_counter() - started) * 1000)
    for name, ms in response.timings_ms.items():
        stages.setdefault(name, []).append(ms)
    return response


def hit_row(hit: SearchHit) -> dict[str, Any]:
    """A ranked fact as result files hold it, with the turns it came from."""
    return {
        "fact_id": hit.fact_id,
        "text": hit.text,
        "dia_ids": hit.turn_ids,
        "score": round(hit.score, 6),
    }


def run_raw_turns(
    encode: Callable[[list[str]], np.ndarray],
    conversations: Sequence[Conversation],
    k: int,
    quiet: bool,
) -> tuple[list[dict[str, Any]], dict[str, list[float]]]:
    """The LoCoMo baseline: cosine over the raw turns with the same embedding model."""
    rows: list[dict[str, Any]] = []
    stages: dict[str, list[float]] = {}
    total = sum(len(c.questions) for c in conversations)
    bar = tqdm(total=total, desc="raw-turns", unit="q", disable=quiet)
    for conv in conversations:
        if not conv.turns:
            raise InvalidInput(f"{conv.name}: no turns with a dia_id")
        matrix = encode([text for _, text in conv.turns])
        for index, qa in conv.questions:
            started = time.perf_counter()
            vector = encode([qa["question"]])[0]
            embedded = time.perf_counter()
            scores = matrix @ vector
            top = np.argsort(-scores, kind="stable")[:k]
            ranked = time.perf_counter()
            stages.setdefault("embedding", []).append((embedded - started) * 1000)
            stages.setdefault("primary", []).append((ranked - embedded) * 1000)
            stages.setdefault("total", []).append((ranked - started) * 1000)
            retrieved = [
                {
                    "fact_id": conv.turns[i][0],
                    "text": conv.turns[i][1],
                    "dia_ids": [conv.turns[i][0]],
                    "score": round(float(scores[i]), 6),
                }
                for i in top
            ]
            rows.append(_row(conv, int(index), qa, retrieved, k, None))
            bar.update()
    bar.close()
    return rows, stages


def run_hybrid_bm25(
    ctx: MemoryContext,
    tenant: str,
    conversations: Sequence[Conversation],
    k: int,
    quiet: bool,
    similarity: SimilaritySettings,
) -> tuple[list[dict[str, Any]], dict[str, list[float]]]:
    """The plain hybrid baseline a user could build in an afternoon: the facts memory holds,
    ranked by cosine and by BM25 over the question's terms (IDF over the conversation's
    facts, the same k1 and b as memory), fused by reciprocal rank 1/(60 + rank) per channel,
    a fact without a query term taking nothing from BM25. No events, graph, profiles,
    participant or time filter."""
    rows: list[dict[str, Any]] = []
    stages: dict[str, list[float]] = {}
    total = sum(len(c.questions) for c in conversations)
    bar = tqdm(total=total, desc="hybrid-bm25", unit="q", disable=quiet)
    for conv in conversations:
        facts = ctx.index(tenant, conv.name).facts
        live = np.flatnonzero(facts.mask())
        for index, qa in conv.questions:
            started = time.perf_counter()
            vector = ctx.embedder.encode([qa["question"]])[0]
            embedded = time.perf_counter()
            dense = facts.cosines(vector)[live]
            lexical = facts.lexicon.scores(
                query_terms(qa["question"]), len(facts.ids), similarity.bm25_k1, similarity.bm25_b
            )[live]
            fused = _rrf(dense) + np.where(lexical > 0, _rrf(lexical), 0.0)
            top = np.lexsort((live, -fused))[:k]
            ranked = time.perf_counter()
            stages.setdefault("embedding", []).append((embedded - started) * 1000)
            stages.setdefault("primary", []).append((ranked - embedded) * 1000)
            stages.setdefault("total", []).append((ranked - started) * 1000)
            retrieved = []
            for i in top:
                fact = facts.records[int(live[i])]
                retrieved.append(
                    {
                        "fact_id": fact.id,
                        "text": fact.text,
                        "dia_ids": fact.all_turn_ids(),
                        "score": round(float(fused[i]), 6),
                    }
                )
            rows.append(_row(conv, int(index), qa, retrieved, k, None))
            bar.update()
    bar.close()
    return rows, stages


def _rrf(scores: np.ndarray) -> np.ndarray:
    """1 / (RRF_K + rank), ranks from 1 by descending score, ties in row order."""
    ranks = np.empty(scores.size, dtype=np.float64)
    ranks[np.argsort(-scores, kind="stable")] = np.arange(1, scores.size + 1)
    out: np.ndarray = 1.0 / (RRF_K + ranks)
    return out


def _row(
    conv: Conversation,
    index: int,
    qa: dict[str, Any],
    retrieved: list[dict[str, Any]],
    k: int,
    answer: str | None,
) -> dict[str, Any]:
    evidence = [str(e) for e in qa.get("evidence", [])]
    row: dict[str, Any] = {
        "conversation": conv.name,
        "index": index,
        "category": qa["category"],
        "question": qa["question"],
        "evidence": evidence,
        "recall": round(recall_at_k(evidence, [r["dia_ids"] for r in retrieved], k), 6),
        "retrieved": retrieved,
    }
    if answer is not None:
        reference = str(qa.get("answer", ""))
        row.update(
            answer=answer,
            reference=reference,
            f1=round(f1(answer, reference), 6),
            bleu1=round(bleu1(answer, reference), 6),
        )
    return row


def summarize(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, float | int | None]]:
    """Recall@k (in %) and question counts per category and overall; F1, BLEU-1 and the
    judge's share correct (J) when answered."""
    groups: dict[str, list[dict[str, Any]]] = {name: [] for name in CATEGORIES.values()}
    for row in rows:
        groups[CATEGORIES[row["category"]]].append(row)
    groups["overall"] = list(rows)
    out: dict[str, dict[str, float | int | None]] = {}
    for name, members in groups.items():
        entry: dict[str, float | int | None] = {"questions": len(members), "recall": None}
        for metric in ("recall", "f1", "bleu1", "judge"):
            values = [m[metric] for m in members if metric in m]
            if values:
                entry[metric] = round(100 * sum(values) / len(values), 2)
        out[name] = entry
    return out


def result_document(
    variant: str,
    k: int,
    command: str,
    rows: list[dict[str, Any]],
    stages: dict[str, list[float]],
    ingest_stats: dict[str, Any] | None,
    settings: dict[str, Any],
    benchmark: str = "locomo",
    summary: Callable[[Sequence[dict[str, Any]]], dict[str, Any]] = summarize,
) -> dict[str, Any]:
    """One variant's result file (of another benchmark with its own summary)."""
    return {
        "benchmark": benchmark,
        "variant": variant,
        "k": k,
        "command": command,
        "summary": summary(rows),
        **query_costs(rows, stages),
        "ingest": ingest_stats,
        "settings": settings,
        "questions": rows,
    }


def query_costs(
    rows: Sequence[dict[str, Any]], stages: dict[str, list[float]]
) -> dict[str, dict[str, Any] | None]:
    """The questions' latency by stage (p50/p95/max) and their model calls and tokens."""
    order = [*STAGES, "through_query_worker"]
    spent = usage.Usage()
    for row in rows:
        spent.merge(usage.Usage.from_counts(row.get("llm_usage", {})))
    return {
        "latency_ms": {name: percentiles(stages[name]) for name in order if name in stages},
        "llm_per_question": llm_summary(spent.as_counts(), len(rows), "per_question"),
    }


def out_path(out: Path, variant: str, many: bool) -> Path:
    """`out` itself for one variant; `out` as a directory of `<variant>.json` for several."""
    if not many:
        return out
    return out / f"locomo_{variant}.json"


def check_variants(names: Sequence[str]) -> list[str]:
    chosen = list(VARIANTS) if not names or "all" in names else list(dict.fromkeys(names))
    unknown = [n for n in chosen if n not in VARIANTS]
    if unknown:
        raise InvalidInput(f"unknown variant {unknown[0]!r}; choose from {', '.join(VARIANTS)}")
    return chosen
