"""Hybrid similarity S_h = alpha * cos(v_a, v_b) + beta * L(a, b) (Eq. 2), L the lexical
channel: BM25 with IDF over the space (common/text/lexical.py) or the paper's keyword
Jaccard."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass

import numpy as np

from common.settings import SimilaritySettings


@dataclass(frozen=True)
class TextQuery:
    """The words S_h compares with a record: a text (a question, a fact, a profile) and its
    keywords. BM25 reads both; the paper's Jaccard reads the keywords."""

    text: str
    keywords: tuple[str, ...] = ()

    @classmethod
    def of(cls, text: str, keywords: Iterable[str] = ()) -> TextQuery:
        return cls(text, tuple(keywords))


def jaccard(a: Collection[str], b: Collection[str]) -> float:
    """|A ∩ B| / |A ∪ B|, 0 when both are empty."""
    sa, sb = set(a), set(b)
    union = len(sa | sb)
    return len(sa & sb) / union if union else 0.0


def hybrid(cosine: float, lexical: float, weights: SimilaritySettings) -> float:
    return weights.alpha * cosine + weights.beta * lexical


def hybrid_many(
    cosines: np.ndarray, lexical: np.ndarray, weights: SimilaritySettings
) -> np.ndarray:
    return weights.alpha * cosines + weights.beta * lexical
