"""`python -m bench.recall_signals`: what `full`'s local graph knows beyond S_h, by category.

Over LoCoMo spaces that `atommem bench locomo` built in `--data-dir`, every question is
searched in `flat` (the S_h top k over the space) and in `full`, whose walk is kept. For each
category it reports:

- `evidence_in`: the share of the evidence turns covered by the whole local graph, by
  `full`'s top k and by `flat`'s top k;
- `auc`: among the local facts outside `flat`'s top k, those covering an evidence turn that
  `flat`'s top k misses (what `full` could add) against the others, the AUC of each signal
  the graph has for a fact: its S_h, its activation, and the weight of its entity, event and
  turn edges from the seeds (0.5 is chance; averaged over the questions with both kinds);
- `ranker`: for each `--fold`, a logistic ranker over those signals fitted on the local facts
  of the conversations outside it (label: the fact covers an evidence turn) and ranking the
  local graphs of the fold's own; its Recall@k beside `full`'s and `flat`'s on the fold. One
  simple weighting of the graph's signals, to set beside S_h; not what `full` should ship.

    python -m bench.recall_signals --data-dir /tmp/bench \\
        --conversations PATH/locomo/conversations --facts PATH/locomo/atommem_facts \\
        --fold A=conv-26,conv-41,conv-43,conv-47 --fold B=conv-30,conv-42,conv-44 \\
        --out bench/results/recall_signals.json
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
from bench.metrics import CATEGORIES, recall_at_k
from common.context import MemoryContext
from common.errors import InvalidInput
from common.retrieval.search import search
from workers import runtime

SIGNALS = ("s_h", "activation", "entity_from_seeds", "event_from_seeds", "turn_from_seeds")


@dataclass
class Question:
    conversation: str
    category: str
    evidence: set[str]
    features: np.ndarray  # local facts × SIGNALS
    turns: list[list[str]]  # each local fact's source turns
    outside_flat: np.ndarray  # each local fact: not in flat's top k
    full: list[list[str]]  # the source turns of full's top k, in rank order
    flat: list[list[str]]


def auc(positive: np.ndarray, negative: np.ndarray) -> float:
    """P(a positive scores above a negative), ties counting one half."""
    above = (positive[:, None] > negative[None, :]).mean()
    ties = (positive[:, None] == negative[None, :]).mean()
    return float(above + 0.5 * ties)


def fit_logistic(x: np.ndarray, y: np.ndarray, steps: int = 500, l2: float = 1e-3) -> np.ndarray:
    """Weights (bias last) of an L2-regularised logistic regression on standardised `x`, by
    gradient descent; `standardise` must be applied with the same statistics to rank."""
    xb = np.hstack([x, np.ones((x.shape[0], 1))])
    w = np.zeros(xb.shape[1])
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-(xb @ w)))
        grad = xb.T @ (p - y) / y.size + l2 * np.r_[w[:-1], 0.0]
        w -= 1.0 * grad
    return w


def standardise(x: np.ndarray, mean: np.ndarray, std: np.ndarray) -> np.ndarray:
    out: np.ndarray = (x - mean) / np.where(std > 0, std, 1.0)
    return out


def collect(
    ctx: MemoryContext, tenant: str, conversations: Sequence[Conversation], k: int
) -> list[Question]:
    out: list[Question] = []
    for conv in conversations:
        index = ctx.index(tenant, conv.name)
        for _, qa in conv.questions:
            flat = search(ctx, tenant, conv.name, qa["question"], k=k, mode="flat")
            full = search(ctx, tenant, conv.name, qa["question"], k=k, mode="full")
            if full.walk is None:
                continue
            walk = full.walk
            in_flat = {h.fact.id for h in flat.hits}
            seeds = np.zeros(len(walk.graph.rows), dtype=bool)
            seeds[: walk.seeds] = True
            from_seeds = [
                np.asarray(m.tocsr()[seeds].sum(axis=0)).ravel() for m in walk.graph.channels
            ]
            features = np.column_stack(
                [walk.relevance, np.log(walk.graph.activation + 1e-12), *map(np.log1p, from_seeds)]
            )
            out.append(
                Question(
                    conversation=conv.name,
                    category=CATEGORIES[qa["category"]],
                    evidence={str(e) for e in qa.get("evidence", []) if e},
                    features=features,
                    turns=[index.facts.records[r].all_turn_ids() for r in walk.graph.rows],
                    outside_flat=np.array(
                        [index.facts.records[r].id not in in_flat for r in walk.graph.rows]
                    ),
                    full=[h.fact.all_turn_ids() for h in full.hits],
                    flat=[h.fact.all_turn_ids() for h in flat.hits],
                )
            )
    return out


def _covered(lists: Sequence[Sequence[str]]) -> set[str]:
    return {t for turns in lists for t in turns}


def signal_auc(questions: Sequence[Question]) -> dict[str, dict[str, float | int]]:
    by: dict[str, dict[str, list[float]]] = {}
    for q in questions:
        missed = q.evidence - _covered(q.flat)
        positive = np.array([bool(set(t) & missed) for t in q.turns]) & q.outside_flat
        negative = q.outside_flat & ~positive
        if not positive.any() or not negative.any():
            continue
        per = by.setdefault(q.category, {})
        for j, name in enumerate(SIGNALS):
            column = q.features[:, j]
            per.setdefault(name, []).append(auc(column[positive], column[negative]))
    return {
        cat: {
            **{n: round(float(np.mean(v)), 3) for n, v in per.items()},
            "questions": len(per[SIGNALS[0]]),
        }
        for cat, per in sorted(by.items())
    }


def evidence_in(questions: Sequence[Question], k: int) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for cat in sorted({q.category for q in questions}):
        qs = [q for q in questions if q.category == cat]
        out[cat] = {
            "local_graph": _mean([recall_at_k(q.evidence, q.turns, len(q.turns)) for q in qs]),
            "full": _mean([recall_at_k(q.evidence, q.full, k) for q in qs]),
            "flat": _mean([recall_at_k(q.evidence, q.flat, k) for q in qs]),
        }
    return out


def _mean(values: Sequence[float]) -> float:
    return round(100 * float(np.mean(values)), 2) if values else 0.0


def cross_fold(
    questions: Sequence[Question], folds: dict[str, list[str]], k: int
) -> dict[str, dict[str, dict[str, float]]]:
    out: dict[str, dict[str, dict[str, float]]] = {}
    for test, names in folds.items():
        train = [q for q in questions if q.conversation not in names]
        tested = [q for q in questions if q.conversation in names]
        if not train or not tested:
            continue
        x = np.vstack([q.features for q in train])
        y = np.concatenate([[bool(set(t) & q.evidence) for t in q.turns] for q in train])
        mean, std = x.mean(axis=0), x.std(axis=0)
        w = fit_logistic(standardise(x, mean, std), y.astype(np.float64))
        result: dict[str, dict[str, float]] = {}
        for cat in sorted({q.category for q in tested}):
            qs = [q for q in tested if q.category == cat]
            ranked = []
            for q in qs:
                score = (
                    np.hstack([standardise(q.features, mean, std), np.ones((len(q.turns), 1))]) @ w
                )
                order = np.argsort(-score, kind="stable")
                ranked.append(recall_at_k(q.evidence, [q.turns[i] for i in order], k))
            result[cat] = {
                "ranker": _mean(ranked),
                "full": _mean([recall_at_k(q.evidence, q.full, k) for q in qs]),
                "flat": _mean([recall_at_k(q.evidence, q.flat, k) for q in qs]),
            }
        out[f"fitted without {test}, ranking {test}"] = result
    return out


def _folds(specs: Sequence[str]) -> dict[str, list[str]]:
    folds: dict[str, list[str]] = {}
    for spec in specs:
        name, sep, members = spec.partition("=")
        if not sep or not name or not members:
            raise InvalidInput(f"--fold {spec!r}: expected NAME=conv-a,conv-b")
        folds[name] = members.split(",")
    return folds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--data-dir", required=True, help="where `bench locomo` built the spaces")
    parser.add_argument("--conversations", required=True)
    parser.add_argument("--facts")
    parser.add_argument("--fold", action="append", default=[], help="NAME=conv-a,conv-b")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    folds = _folds(args.fold)
    from common.settings import get_settings

    settings = get_settings().in_data_dir(Path(args.data_dir))
    runtime.configure(settings)
    try:
        conversations = load_conversations(
            Path(args.conversations), Path(args.facts) if args.facts else None
        )
        ctx = runtime.context()
        questions = collect(ctx, settings.tenant, conversations, args.k)
        doc = {
            "benchmark": "recall_signals",
            "command": " ".join(["python -m bench.recall_signals", *sys.argv[1:]]),
            "k": args.k,
            "signals": list(SIGNALS),
            "evidence_in": evidence_in(questions, args.k),
            "auc": signal_auc(questions),
            "ranker": cross_fold(questions, folds, args.k),
        }
    finally:
        runtime.reset()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
