"""A commit stage primes the fact matrix with its drafts' vectors: the cosines it reads must
equal a fresh product, after rows are appended and rewritten too."""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel

from common.store.space_index import KindIndex


class _Row(BaseModel):
    participants: list[str] = []


def _unit(rng: np.random.Generator, n: int) -> np.ndarray:
    m = rng.standard_normal((n, 8)).astype(np.float32)
    out: np.ndarray = m / np.linalg.norm(m, axis=1, keepdims=True)
    return out


def test_primed_cosines_follow_appends_and_rewrites() -> None:
    rng = np.random.default_rng(3)
    index: KindIndex[_Row] = KindIndex(8, lambda row: row.participants)
    for i, v in enumerate(_unit(rng, 50)):
        index.upsert(f"r{i}", _Row(), v, [], "")
    drafts = _unit(rng, 4)
    index.prime(drafts)
    index.upsert("new", _Row(), drafts[0], [], "")  # appended after priming
    index.upsert("r7", _Row(), drafts[1], [], "")  # rewritten after priming
    for vector in [*drafts, _unit(rng, 1)[0]]:  # the last one was never primed
        assert np.allclose(index.cosines(vector), index.matrix @ vector, atol=1e-6)
    assert np.isclose(index.cosines(drafts[1])[index.rows["r7"]], 1.0, atol=1e-6)
    index.unprime()
    assert np.allclose(index.cosines(drafts[0]), index.matrix @ drafts[0], atol=1e-6)


def test_a_few_rows_read_on_their_own_match_the_product_with_every_row() -> None:
    rng = np.random.default_rng(4)
    index: KindIndex[_Row] = KindIndex(8, lambda row: row.participants)
    for i, v in enumerate(_unit(rng, 200)):
        index.upsert(f"r{i}", _Row(), v, [], "")
    vector = _unit(rng, 1)[0]
    few, most = np.array([3, 50, 199]), np.arange(0, 200, 2)
    for rows in (few, most):
        assert np.allclose(index.cosines_at(vector, rows), (index.matrix @ vector)[rows])
    drafts = _unit(rng, 3)
    index.prime(drafts)
    index.upsert("r9", _Row(), drafts[2], [], "")  # rewritten before the product is made
    for rows in (few, most, np.array([9])):
        assert np.allclose(index.cosines_at(drafts[2], rows), (index.matrix @ drafts[2])[rows])
