"""Channel mixing and random walk with restart on a sparse local graph (Eq. 7-11)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp


def _scale_rows(matrix: sp.csr_matrix, factors: np.ndarray) -> sp.csr_matrix:
    """diag(factors) @ matrix, on the CSR arrays directly."""
    data = matrix.data * np.repeat(factors, np.diff(matrix.indptr))
    return sp.csr_matrix((data, matrix.indices, matrix.indptr), shape=matrix.shape)


def row_normalize(matrix: sp.csr_matrix) -> sp.csr_matrix:
    """Each non-empty row scaled to sum 1; empty rows stay empty."""
    matrix = sp.csr_matrix(matrix)
    sums = np.asarray(matrix.sum(axis=1)).ravel()
    inv = np.divide(1.0, sums, out=np.zeros_like(sums, dtype=np.float64), where=sums > 0)
    return _scale_rows(matrix, inv)


def mix_channels(channels: Sequence[sp.csr_matrix], rhos: Sequence[float]) -> sp.csr_matrix:
    """P = Σ_c ρ'_c(i) · Ŵ_c with Ŵ_c row-normalised and, for each node i, the priors ρ
    renormalised over the channels in which i has edges (Eq. 7-8)."""
    matrices = [sp.csr_matrix(c) for c in channels]
    sums = np.stack([np.asarray(m.sum(axis=1)).ravel() for m in matrices], axis=1)
    present = sums > 0
    weights = present * np.asarray(rhos, dtype=np.float64)
    totals = weights.sum(axis=1, keepdims=True)
    weights = np.divide(weights, totals, out=np.zeros_like(weights), where=totals > 0)
    # ρ'_c(i) / Σ_j W_c[i, j] scales row i of channel c; one pass over each channel's entries
    factors = np.divide(weights, sums, out=np.zeros_like(weights), where=present)
    mixed = _scale_rows(matrices[0], factors[:, 0])
    for c in range(1, len(matrices)):
        mixed = mixed + _scale_rows(matrices[c], factors[:, c])
    return sp.csr_matrix(mixed)


def restart_vector(scores: np.ndarray, power: float) -> np.ndarray:
    """p ∝ score^power over the seeds (Eq. 9); uniform if every score is zero."""
    sharpened = np.power(np.clip(scores, 0.0, None), power)
    total = sharpened.sum()
    if total <= 0:
        return np.full(scores.shape, 1.0 / scores.size)
    restart: np.ndarray = sharpened / total
    return restart


def random_walk_with_restart(
    transition: sp.csr_matrix, restart: np.ndarray, eta: float, max_iter: int, tol: float
) -> np.ndarray:
    """r = η p + (1 − η)(Pᵀ r + d(r) p), where d(r) is the mass on dangling nodes (rows of P
    with no edges), sent back to the restart vector (Eq. 10-11). Power iteration."""
    dangling = np.asarray(transition.sum(axis=1)).ravel() == 0
    transposed = transition.T.tocsr()
    r = restart.copy()
    for _ in range(max_iter):
        nxt = eta * restart + (1.0 - eta) * (transposed @ r + r[dangling].sum() * restart)
        delta = np.abs(nxt - r).sum()
        r = nxt
        if delta < tol:
            break
    return r


def fuse_ranks(activation: np.ndarray, relevance: np.ndarray, share: float, k: int) -> np.ndarray:
    """Reciprocal rank fusion of two scores over the same nodes:
    share/(k + rank_activation) + (1 − share)/(k + rank_relevance), ranks from 1.
    Ties keep node order, so seeds (listed first) win them."""
    ranks_a = np.empty(activation.size, dtype=np.int64)
    ranks_a[np.argsort(-activation, kind="stable")] = np.arange(1, activation.size + 1)
    ranks_r = np.empty(relevance.size, dtype=np.int64)
    ranks_r[np.argsort(-relevance, kind="stable")] = np.arange(1, relevance.size + 1)
    return share / (k + ranks_a) + (1.0 - share) / (k + ranks_r)
