"""Channel mixing and random walk with restart on a local graph (Eq. 7-11)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp


def mix_channels(channels: Sequence[sp.csr_matrix], rhos: Sequence[float]) -> np.ndarray:
    """P = Σ_c ρ'_c(i) · Ŵ_c with Ŵ_c row-normalised and, for each node i, the priors ρ
    renormalised over the channels in which i has edges (Eq. 7-8).

    P is dense: a local graph has at most a few hundred nodes (graph.max_local_nodes), where
    a dense array costs less to build and to walk than sparse matrices' bookkeeping. It
    agrees with the sparse computation to rounding (about 1e-17), not bit for bit: sums are
    taken in another order."""
    n = channels[0].shape[0]
    rows = [np.repeat(np.arange(n), np.diff(matrix.indptr)) for matrix in channels]
    sums = np.stack(
        [np.bincount(r, weights=m.data, minlength=n) for r, m in zip(rows, channels, strict=True)],
        axis=1,
    )
    present = sums > 0
    weights = present * np.asarray(rhos, dtype=np.float64)
    totals = weights.sum(axis=1, keepdims=True)
    weights = np.divide(weights, totals, out=np.zeros_like(weights), where=totals > 0)
    # ρ'_c(i) / Σ_j W_c[i, j] scales row i of channel c
    factors = np.divide(weights, sums, out=np.zeros_like(weights), where=present)
    # every channel's entries summed into one flat array, channel after channel: a cell adds
    # its channels' values in channel order, as adding each channel in turn would
    cells, values = [], []
    for c, (at, matrix) in enumerate(zip(rows, channels, strict=True)):
        cells.append(at * n + matrix.indices)
        values.append(matrix.data * factors[at, c])
    flat = np.bincount(np.concatenate(cells), weights=np.concatenate(values), minlength=n * n)
    mixed: np.ndarray = flat.reshape(n, n)
    return mixed


def restart_vector(scores: np.ndarray, power: float) -> np.ndarray:
    """p ∝ score^power over the seeds (Eq. 9); uniform if every score is zero."""
    sharpened = np.power(np.clip(scores, 0.0, None), power)
    total = sharpened.sum()
    if total <= 0:
        return np.full(scores.shape, 1.0 / scores.size)
    restart: np.ndarray = sharpened / total
    return restart


def random_walk_with_restart(
    transition: np.ndarray, restart: np.ndarray, eta: float, max_iter: int, tol: float
) -> np.ndarray:
    """r = η p + (1 − η)(Pᵀ r + d(r) p), where d(r) is the mass on dangling nodes (rows of P
    with no edges), sent back to the restart vector (Eq. 10-11). Power iteration on the
    dense P of `mix_channels`."""
    dangling = np.flatnonzero(~transition.any(axis=1))
    transposed = np.ascontiguousarray(transition.T)
    held, moved = eta * restart, 1.0 - eta
    r = restart.copy()
    for _ in range(max_iter):
        spread = transposed @ r
        if dangling.size:  # with none, the term adds zeros: skipping it changes no bit
            spread += r[dangling].sum() * restart
        nxt = held + moved * spread
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
