"""Hybrid similarity S_h = alpha * cos(v_a, v_b) + beta * Jaccard(K_a, K_b) (Eq. 2)."""

from __future__ import annotations

from collections.abc import Collection

import numpy as np

from common.settings import SimilaritySettings


def jaccard(a: Collection[str], b: Collection[str]) -> float:
    """|A ∩ B| / |A ∪ B|, 0 when both are empty."""
    sa, sb = set(a), set(b)
    union = len(sa | sb)
    return len(sa & sb) / union if union else 0.0


def hybrid(cosine: float, keyword_jaccard: float, weights: SimilaritySettings) -> float:
    return weights.alpha * cosine + weights.beta * keyword_jaccard


def hybrid_many(
    cosines: np.ndarray, jaccards: np.ndarray, weights: SimilaritySettings
) -> np.ndarray:
    return weights.alpha * cosines + weights.beta * jaccards
