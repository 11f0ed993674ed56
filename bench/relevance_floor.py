"""`python -m bench.relevance_floor`: what a relevance floor (`retrieval.min_relevance`) keeps
of the recall on a space's own questions and what it drops of the questions that have no
answer there.

Over the LoCoMo spaces `atommem bench locomo` built in `--data-dir`, every question of
categories 1-4 is searched (`full`, top k, no floor) three ways:

- in its own space: each hit's relevance S_h(F,Q) and whether it covers an evidence turn;
- in another conversation's space (the next one in the fold, whose people and happenings
  are others'): questions memory has no answer to that still share the dataset's topics;
- and a fixed list of off-topic probes (`PROBES`, nothing of LoCoMo) in every space.

For each candidate floor it reports Recall@k on the own questions with the hits below the
floor dropped, and the share of foreign questions and probes that come back empty. The floor
is chosen on one fold (`--choose-on`): the highest floor whose Recall@k on that fold is within
`--max-loss` points of no floor; the report gives the other folds at that floor.

    python -m bench.relevance_floor --data-dir /tmp/bench \\
        --conversations PATH/locomo/conversations --facts PATH/locomo/atommem_facts \\
        --fold A=conv-26,conv-41,conv-43,conv-47 --fold B=conv-30,conv-42,conv-44 \\
        --choose-on A --out bench/results/relevance_floor.json
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.locomo import Conversation, load_conversations
from bench.metrics import recall_at_k
from bench.recall_signals import _folds
from common.context import MemoryContext
from common.errors import InvalidInput
from common.retrieval.search import search
from workers import runtime

# Questions no personal memory answers, asked of every space (none names a LoCoMo topic).
PROBES = (
    "x",
    "asdf qwerty",
    "What is the capital of Australia?",
    "How do I reset my router's password?",
    "Explain the difference between TCP and UDP.",
    "What is the boiling point of water at sea level?",
    "Convert 30 degrees Celsius to Fahrenheit.",
    "Who wrote the theory of general relativity?",
    "What is the square root of 144?",
    "How many bytes are in a kilobyte?",
    "Translate 'good morning' into German.",
    "What time zone is Tokyo in?",
)
FLOORS = tuple(round(0.01 * i, 2) for i in range(0, 61))


@dataclass
class Asked:
    conversation: str
    evidence: set[str]
    relevance: list[float]  # own space: each hit's, in rank order
    turns: list[list[str]]  # own space: each hit's source turns
    foreign_top: float  # the best relevance in another conversation's space (0: no hit)


def _best(ctx: MemoryContext, tenant: str, space: str, question: str, k: int) -> float:
    hits = search(ctx, tenant, space, question, k=k, mode="full", min_score=0.0).hits
    return max((h.relevance for h in hits), default=0.0)


def collect(
    ctx: MemoryContext, tenant: str, fold: Sequence[Conversation], k: int
) -> tuple[list[Asked], list[float]]:
    """Each question of the fold, asked in its own space and the next one's; and the best
    relevance of each probe in each space."""
    asked: list[Asked] = []
    for i, conv in enumerate(fold):
        other = fold[(i + 1) % len(fold)].name
        for _, qa in conv.questions:
            hits = search(
                ctx, tenant, conv.name, qa["question"], k=k, mode="full", min_score=0.0
            ).hits
            asked.append(
                Asked(
                    conversation=conv.name,
                    evidence={str(e) for e in qa.get("evidence", []) if e},
                    relevance=[h.relevance for h in hits],
                    turns=[h.fact.all_turn_ids() for h in hits],
                    foreign_top=_best(ctx, tenant, other, qa["question"], k),
                )
            )
    probes = [_best(ctx, tenant, conv.name, probe, k) for conv in fold for probe in PROBES]
    return asked, probes


def at_floor(
    asked: Sequence[Asked], probes: Sequence[float], floor: float, k: int
) -> dict[str, float]:
    recall = [
        recall_at_k(
            q.evidence, [t for t, r in zip(q.turns, q.relevance, strict=True) if r >= floor], k
        )
        for q in asked
    ]
    return {
        "floor": floor,
        "recall_at_k": round(100 * float(np.mean(recall)), 2),
        "own_empty": _share([max(q.relevance, default=0.0) < floor for q in asked]),
        "foreign_empty": _share([q.foreign_top < floor for q in asked]),
        "probes_empty": _share([p < floor for p in probes]),
    }


def _share(flags: Sequence[bool]) -> float:
    return round(100 * float(np.mean(flags)), 2) if flags else 0.0


def distribution(values: Sequence[float]) -> dict[str, float]:
    a = np.asarray(values, dtype=np.float64)
    if a.size == 0:
        return {}
    return {f"p{q}": round(float(np.percentile(a, q)), 3) for q in (1, 5, 10, 25, 50, 75, 90)}


def summarise(asked: Sequence[Asked], probes: Sequence[float]) -> dict[str, object]:
    evidence: list[float] = []
    other: list[float] = []
    for q in asked:
        for turns, r in zip(q.turns, q.relevance, strict=True):
            (evidence if set(turns) & q.evidence else other).append(r)
    return {
        "questions": len(asked),
        "hits_on_evidence": distribution(evidence),
        "hits_off_evidence": distribution(other),
        "foreign_top": distribution([q.foreign_top for q in asked]),
        "probe_top": distribution(probes),
    }


def choose(rows: Sequence[dict[str, float]], max_loss: float) -> float:
    """The highest floor whose Recall@k is within `max_loss` points of no floor's."""
    base = rows[0]["recall_at_k"]
    return max(r["floor"] for r in rows if base - r["recall_at_k"] <= max_loss)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--data-dir", required=True, help="where `bench locomo` built the spaces")
    parser.add_argument("--conversations", required=True)
    parser.add_argument("--facts")
    parser.add_argument("--fold", action="append", default=[], help="NAME=conv-a,conv-b")
    parser.add_argument("--choose-on", required=True, help="the fold the floor is chosen on")
    parser.add_argument("--max-loss", type=float, default=1.0, help="Recall@k points")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    folds = _folds(args.fold)
    if args.choose_on not in folds:
        raise InvalidInput(f"--choose-on {args.choose_on!r}: not one of the folds {list(folds)}")
    from common.settings import get_settings

    settings = get_settings().in_data_dir(Path(args.data_dir))
    runtime.configure(settings)
    try:
        conversations = {
            c.name: c
            for c in load_conversations(
                Path(args.conversations), Path(args.facts) if args.facts else None
            )
        }
        ctx = runtime.context()
        per_fold: dict[str, dict[str, object]] = {}
        rows_of: dict[str, list[dict[str, float]]] = {}
        for name, members in folds.items():
            asked, probes = collect(
                ctx, settings.tenant, [conversations[m] for m in members], args.k
            )
            rows_of[name] = [at_floor(asked, probes, f, args.k) for f in FLOORS]
            per_fold[name] = {"conversations": members, **summarise(asked, probes)}
        chosen = choose(rows_of[args.choose_on], args.max_loss)
        for name, rows in rows_of.items():
            per_fold[name]["no_floor"] = rows[0]
            per_fold[name]["at_chosen"] = next(r for r in rows if r["floor"] == chosen)
            per_fold[name]["floors"] = rows
        doc = {
            "benchmark": "relevance_floor",
            "command": " ".join(["python -m bench.relevance_floor", *sys.argv[1:]]),
            "k": args.k,
            "mode": "full",
            "chosen_on": args.choose_on,
            "max_loss": args.max_loss,
            "chosen_floor": chosen,
            "probes": list(PROBES),
            "folds": per_fold,
        }
    finally:
        runtime.reset()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    brief = {n: {k: v for k, v in f.items() if k != "floors"} for n, f in per_fold.items()}
    print(json.dumps({"chosen_floor": chosen, "folds": brief}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
