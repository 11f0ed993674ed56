"""The arithmetic of bench.recall_signals: AUC with ties, and the logistic ranker."""

from __future__ import annotations

import numpy as np

from bench.recall_signals import _folds, auc, fit_logistic, standardise


def test_auc_by_hand() -> None:
    assert auc(np.array([3.0, 4.0]), np.array([1.0, 2.0])) == 1.0
    assert auc(np.array([1.0]), np.array([2.0])) == 0.0
    # 3 > 1, 3 == 3 (half), 2 > 1, 2 < 3: (1 + 0.5 + 1 + 0) / 4
    assert auc(np.array([3.0, 2.0]), np.array([1.0, 3.0])) == 0.625


def test_the_ranker_learns_which_signal_separates() -> None:
    """The label follows the second column; the first is noise. The fitted ranker orders
    held-out rows by the second column."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, 2))
    y = (x[:, 1] > 0).astype(np.float64)
    mean, std = x.mean(axis=0), x.std(axis=0)
    w = fit_logistic(standardise(x, mean, std), y)
    assert abs(w[1]) > 5 * abs(w[0]) and w[1] > 0
    held = rng.normal(size=(50, 2))
    score = np.hstack([standardise(held, mean, std), np.ones((50, 1))]) @ w
    assert auc(score[held[:, 1] > 0], score[held[:, 1] <= 0]) == 1.0


def test_folds_parse() -> None:
    assert _folds(["A=conv-1,conv-2", "B=conv-3"]) == {"A": ["conv-1", "conv-2"], "B": ["conv-3"]}


def test_a_fold_without_members_is_refused() -> None:
    import pytest

    from common.errors import InvalidInput

    with pytest.raises(InvalidInput, match="NAME=conv-a,conv-b"):
        _folds(["A="])
