"""One extraction's facts matched one to one with reference facts of the same turns, and the
precision, recall and F1 of the match.

A pair may match only within one session and within `window` turns of each other (the same
turn at 0): an extractor may attach a fact to the turn that completes it ("Yes, last Friday")
where the reference attached it to the turn before, and a fact of another session is never
the same statement. Among the pairs allowed, a maximum-weight bipartite matching on cosine
similarity (scipy's `linear_sum_assignment`) picks at most one partner per fact, and a pair
counts only at or above `threshold`. Pure: vectors in, counts out.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import linear_sum_assignment

# A window that allows any two turns of one session.
SESSION = 1_000_000


@dataclass(frozen=True)
class PlacedFact:
    """A fact and where it was said: its session and its turn's position in that session."""

    text: str
    session: str
    turn: int
    dia_id: str


@dataclass(frozen=True)
class Pair:
    """A matched pair: indexes into the extracted and the reference facts, and their cosine."""

    extracted: int
    reference: int
    similarity: float


@dataclass(frozen=True)
class Score:
    """Matched pairs over extracted and reference facts."""

    matched: int
    extracted: int
    reference: int

    @property
    def precision(self) -> float:
        return self.matched / self.extracted if self.extracted else 0.0

    @property
    def recall(self) -> float:
        return self.matched / self.reference if self.reference else 0.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0

    def __add__(self, other: Score) -> Score:
        return Score(
            self.matched + other.matched,
            self.extracted + other.extracted,
            self.reference + other.reference,
        )

    def as_dict(self) -> dict[str, float | int]:
        """Counts, and P/R/F1 in % (two decimals)."""
        return {
            "matched": self.matched,
            "extracted": self.extracted,
            "reference": self.reference,
            "precision": round(100 * self.precision, 2),
            "recall": round(100 * self.recall, 2),
            "f1": round(100 * self.f1, 2),
        }


def assign(similarity: np.ndarray, allowed: np.ndarray, threshold: float) -> list[Pair]:
    """The one-to-one matching of rows to columns that maximises the summed similarity of
    allowed pairs at or above `threshold`; only such pairs are returned."""
    if similarity.size == 0:
        return []
    eligible = allowed & (similarity >= threshold)
    # Ineligible pairs weigh nothing, so the solver never prefers one; any it still returns
    # (a row with no eligible column is assigned somewhere) are dropped below.
    weights = np.where(eligible, similarity, 0.0)
    rows, cols = linear_sum_assignment(weights, maximize=True)
    return [
        Pair(int(r), int(c), float(similarity[r, c]))
        for r, c in zip(rows, cols, strict=True)
        if eligible[r, c]
    ]


def match(
    extracted: Sequence[PlacedFact],
    reference: Sequence[PlacedFact],
    extracted_vectors: np.ndarray,
    reference_vectors: np.ndarray,
    threshold: float,
    window: int,
) -> list[Pair]:
    """The matching of one conversation, session by session, with pairs within `window`
    turns; the vectors are L2-normalised rows in the facts' order."""
    by_session_e: dict[str, list[int]] = defaultdict(list)
    by_session_r: dict[str, list[int]] = defaultdict(list)
    for i, fact in enumerate(extracted):
        by_session_e[fact.session].append(i)
    for j, fact in enumerate(reference):
        by_session_r[fact.session].append(j)
    pairs: list[Pair] = []
    for session in sorted(by_session_e.keys() & by_session_r.keys()):
        rows, cols = by_session_e[session], by_session_r[session]
        similarity = extracted_vectors[rows] @ reference_vectors[cols].T
        turns_e = np.array([extracted[i].turn for i in rows])
        turns_r = np.array([reference[j].turn for j in cols])
        allowed = np.abs(turns_e[:, None] - turns_r[None, :]) <= window
        for pair in assign(similarity, allowed, threshold):
            pairs.append(Pair(rows[pair.extracted], cols[pair.reference], pair.similarity))
    return sorted(pairs, key=lambda p: (p.extracted, p.reference))


def score(pairs: Sequence[Pair], extracted: int, reference: int) -> Score:
    return Score(len(pairs), extracted, reference)
