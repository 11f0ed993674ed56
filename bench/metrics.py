"""Benchmark metrics: Recall@k over evidence turn ids (DESIGN §8), LongMemEval's retrieval
scores (recall_any, recall_all, NDCG), answer F1 and BLEU-1, and latency percentiles."""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from collections.abc import Collection, Iterable, Sequence

# LoCoMo category numbers as they appear in the files.
CATEGORIES: dict[int, str] = {4: "single_hop", 1: "multi_hop", 2: "temporal", 3: "open_domain"}


def recall_at_k(evidence: Iterable[str], retrieved_turns: Sequence[Iterable[str]], k: int) -> float:
    """The share of the evidence turn ids covered by the source turns of the first k items.

    Evidence strings are compared as they are, so a malformed id in the data counts as missed
    (figures stay comparable with the reference). A question without evidence (an empty list,
    or only empty strings) scores 1: nothing is there to miss. This is the convention of the
    paper's reference scorer (`recall_at_k` in scripts/evaluate_locomo.py of
    MINE-USTC/AtomMem), so its Table 2 figures are comparable with ours; LoCoMo has a few
    such open-domain questions, and every variant, raw-turns included, gets them in full."""
    wanted = {e for e in evidence if e}
    if not wanted:
        return 1.0
    covered: set[str] = set()
    for turns in retrieved_turns[:k]:
        covered.update(turns)
    return len(wanted & covered) / len(wanted)


def first_seen(groups: Iterable[Iterable[str]]) -> list[str]:
    """The ids of ranked items, each where it first appears: a session (or turn) ranks where
    its best fact ranks."""
    return list(dict.fromkeys(i for group in groups for i in group))


def dcg(relevances: Sequence[float], k: int) -> float:
    """Discounted cumulative gain of the first k relevances as LongMemEval's scorer sums it:
    the first in full, the one at 1-based rank r >= 2 over log2(r), so ranks 1 and 2 weigh
    the same."""
    return sum(rel / math.log2(max(rank, 2)) for rank, rel in enumerate(relevances[:k], 1))


def retrieval_scores(ranked: Sequence[str], gold: Collection[str], k: int) -> dict[str, float]:
    """recall_any@k (some gold id in the first k), recall_all@k (every one) and ndcg_any@k of
    a ranked id list, as LongMemEval's retrieval scorer (src/retrieval/eval_utils.py of
    xiaowu0162/LongMemEval) defines them over a corpus that holds each gold id once. Without
    gold ids its conventions hold: recall_any 0, recall_all 1 (nothing is missing), NDCG 0."""
    top = ranked[:k]
    ideal = dcg([1.0] * min(len(gold), k), k)
    actual = dcg([1.0 if i in gold else 0.0 for i in top], k)
    return {
        f"recall_any@{k}": float(any(g in top for g in gold)),
        f"recall_all@{k}": float(all(g in top for g in gold)),
        f"ndcg_any@{k}": actual / ideal if ideal else 0.0,
    }


_ARTICLES = re.compile(r"\b(a|an|the|and)\b")
_PUNCT = str.maketrans("", "", string.punctuation)


def answer_tokens(text: str) -> list[str]:
    """Lower-cased, punctuation and articles removed, split on whitespace."""
    return _ARTICLES.sub(" ", str(text).lower().translate(_PUNCT)).split()


def f1(prediction: str, reference: str) -> float:
    """Token-overlap F1 between a predicted and a reference answer."""
    pred, ref = answer_tokens(prediction), answer_tokens(reference)
    common = sum((Counter(pred) & Counter(ref)).values())
    if not pred or not ref or common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)


def bleu1(prediction: str, reference: str) -> float:
    """Clipped unigram precision times the brevity penalty (sentence BLEU-1)."""
    pred, ref = answer_tokens(prediction), answer_tokens(reference)
    if not pred or not ref:
        return 0.0
    clipped = sum((Counter(pred) & Counter(ref)).values())
    penalty = 1.0 if len(pred) > len(ref) else math.exp(1 - len(ref) / len(pred))
    return penalty * clipped / len(pred)


def percentiles(values: Sequence[float]) -> dict[str, float]:
    """p50, p95 (nearest rank) and max, in the values' unit, rounded to 0.01."""
    if not values:
        return {"p50": 0.0, "p95": 0.0, "max": 0.0}
    ordered = sorted(values)

    def rank(q: float) -> float:
        return ordered[max(0, math.ceil(q * len(ordered)) - 1)]

    return {"p50": round(rank(0.5), 2), "p95": round(rank(0.95), 2), "max": round(ordered[-1], 2)}
