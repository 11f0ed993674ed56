"""A large kind's first pass over its rows in bfloat16: the bound on each cosine's error
holds, and a top k ranked through it is the exact top k, entry for entry."""

from __future__ import annotations

import pickle
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
import torch
from pydantic import BaseModel

from common.settings import SimilaritySettings
from common.similarity import TextQuery
from common.store import bfloat16_rows, space_index
from common.store.bfloat16_rows import BFloat16Rows, rounded
from common.store.space_index import KindIndex

BM25 = SimilaritySettings(alpha=0.7, beta=0.3, lexical="bm25")
WORDS = ["pottery", "hiking", "vase", "garden", "river", "violin", "bread", "chess"]


class _Row(BaseModel):
    participants: list[str] = []


def _people(row: _Row) -> list[str]:
    return row.participants


def _unit(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    m = rng.standard_normal((n, d)).astype(np.float32)
    out: np.ndarray = m / np.linalg.norm(m, axis=1, keepdims=True)
    return out


@pytest.fixture(autouse=True)
def _torch_loaded() -> None:
    assert bfloat16_rows.wait_for_torch(60) is not None


@pytest.fixture
def _copy_from_300_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(space_index, "MIN_ROWS", 300)


def test_rounding_is_pytorchs_round_to_nearest_even() -> None:
    rng = np.random.default_rng(1)
    values = np.concatenate([_unit(rng, 200, 64).ravel(), [0.0, -0.0, 1.0, -1.0, 1e-30]])
    # halfway cases: the low 16 bits exactly 0x8000, above an even and an odd upper half
    halfway = np.array([0x3F808000, 0x3F818000, 0xBF808000], dtype=np.uint32).view(np.float32)
    values = np.concatenate([values, halfway]).astype(np.float32)
    bits, back = rounded(values[None, :])
    theirs = torch.from_numpy(values).to(torch.bfloat16)
    assert np.array_equal(bits[0], theirs.view(torch.int16).numpy())
    assert np.array_equal(back[0], theirs.float().numpy())


def test_the_bound_holds_for_every_row() -> None:
    rng = np.random.default_rng(2)
    d = 384
    matrix = _unit(rng, 3000, d)
    matrix[10] = 0.0  # a removed row
    matrix[11] = matrix[12]  # duplicates
    copy = BFloat16Rows(matrix, 4096)
    queries = [*_unit(rng, 20, d), 0.6 * _unit(rng, 1, d)[0], matrix[12].copy()]
    for query in queries:  # one shorter than a unit vector (a question less its names' part)
        found = copy.cosines(query, matrix.shape[0])
        assert found is not None
        approx, bound = found
        exact = matrix.astype(np.float64) @ query.astype(np.float64)
        assert np.all(np.abs(exact - approx) <= bound)
        assert float(np.median(bound)) < 0.01  # and tight enough to rule rows out
    batch = copy.batch(np.stack(queries), matrix.shape[0])  # a commit's drafts, at once
    assert batch is not None
    for j, query in enumerate(queries):
        approx, bound = batch.row(j)
        exact = matrix.astype(np.float64) @ query.astype(np.float64)
        assert np.all(np.abs(exact - approx) <= bound)
        alone = copy.cosines(query, matrix.shape[0])
        assert alone is not None and np.allclose(bound, alone[1], rtol=1e-5, atol=0)


def test_the_bound_holds_at_a_large_spaces_shape() -> None:
    # the kernels PyTorch picks for a commit's batch, and for a question's one row, against
    # 40k rows of 384 dimensions
    rng = np.random.default_rng(13)
    matrix = _unit(rng, 40_000, 384)
    copy = BFloat16Rows(matrix, matrix.shape[0])
    drafts = np.concatenate([_unit(rng, 14, 384), matrix[[7, 9]]])
    batch = copy.batch(drafts, matrix.shape[0])
    assert batch is not None
    exact = drafts.astype(np.float64) @ matrix.astype(np.float64).T
    for j in range(len(drafts)):
        approx, bound = batch.row(j)
        assert np.all(np.abs(exact[j] - approx) <= bound)
    for j in (0, 3, 15):  # a question (0.6: shorter than a unit vector, less its names' part)
        for query in (drafts[j], 0.6 * drafts[j]):
            found = copy.cosines(query, matrix.shape[0])
            assert found is not None
            approx, bound = found
            exact_one = matrix.astype(np.float64) @ query.astype(np.float64)
            assert np.all(np.abs(exact_one - approx) <= bound)


def _space(rng: np.random.Generator, n: int, d: int) -> KindIndex[_Row]:
    """Rows in clusters of near-duplicates (closer than bfloat16 can tell apart) with words
    drawn from a few: the exact top k turns on float32 differences and on ties."""
    index: KindIndex[_Row] = KindIndex(d, _people)
    centres = _unit(rng, 40, d)
    for i in range(n):
        centre = centres[rng.integers(40)]
        vector = centre + rng.standard_normal(d).astype(np.float32) * 2e-4
        vector = (vector / np.linalg.norm(vector)).astype(np.float32)
        if i % 97 == 0:
            vector = index.matrix[i - 1].copy() if i else vector  # an exact duplicate
        words = list(rng.choice(WORDS, size=2, replace=False))
        people = ["Ann"] if i % 3 else ["Ben"]
        index.upsert(f"r{i}", _Row(participants=people), vector, words, " ".join(words))
    return index


Entry = tuple[str, float, float, float]


def _ranked(
    index: KindIndex[_Row],
    vector: np.ndarray,
    text: str,
    k: int,
    mask: np.ndarray | None = None,
    exclude: Sequence[str] = (),
) -> list[Entry]:
    rows = index.mask() if mask is None else mask
    found = index.hybrid(vector, TextQuery.of(text), BM25, rows, k=k, exclude=exclude)
    return [(s.id, s.score, s.cosine, s.lexical) for s in found]


def _same(first: list[Entry], exact: list[Entry]) -> bool:
    """The same scores place by place, and the same row wherever its score is its own: the
    few rows the first pass keeps are scored by a product of their own, whose sums may round
    differently (a unit in float32's last place) from the product with every row, so rows
    tied to that last place may trade places (or, at the k-th, which of them is in)."""
    if len(first) != len(exact):
        return False
    if not np.allclose([r[1:] for r in first], [r[1:] for r in exact], rtol=0, atol=1e-6):
        return False
    scores = [r[1] for r in exact]
    return all(
        first[i][0] == exact[i][0]
        for i, score in enumerate(scores)
        if sum(abs(score - other) <= 1e-6 for other in scores) == 1 and score > scores[-1] + 1e-6
    )


def _with_and_without_copy(
    index: KindIndex[_Row], vector: np.ndarray, text: str, k: int, **kw: Any
) -> tuple[list[Entry], list[Entry]]:
    copy = index._bf16
    assert copy is not None
    first = _ranked(index, vector, text, k, **kw)
    index._bf16 = None
    try:
        exact = _ranked(index, vector, text, k, **kw)
    finally:
        index._bf16 = copy
    return first, exact


@pytest.mark.usefixtures("_copy_from_300_rows")
def test_a_top_k_through_the_first_pass_is_the_exact_top_k() -> None:
    rng = np.random.default_rng(3)
    index = _space(rng, 1200, 32)
    assert index._bf16 is not None  # made when the 300th row came in, kept since
    ruled_out = 0
    for trial in range(40):
        vector = index.matrix[rng.integers(1200)] if trial % 2 else _unit(rng, 1, 32)[0]
        text = " ".join(rng.choice(WORDS, size=2, replace=False))
        for k in (1, 5, 10):
            first, exact = _with_and_without_copy(index, vector=vector, text=text, k=k)
            assert _same(first, exact)
        lexical = index.lexical(TextQuery.of(text), BM25)
        kept = index._ruled_in(vector, np.arange(1200), lexical, BM25, 5)
        assert kept is not None
        ruled_out += 1200 - kept.size
    assert ruled_out > 0.5 * 40 * 1200  # the first pass does rule rows out


@pytest.mark.usefixtures("_copy_from_300_rows")
def test_the_copy_follows_writes_growth_masks_and_a_saved_index() -> None:
    rng = np.random.default_rng(4)
    index = _space(rng, 400, 16)
    vector = index.matrix[5].copy()
    index.upsert("r7", _Row(participants=["Ann"]), vector, ["pottery"], "pottery")  # rewritten
    index.remove("r5")
    for i in range(400, 700):  # past the capacity the copy was made with
        index.upsert(f"r{i}", _Row(participants=["Ben"]), _unit(rng, 1, 16)[0], ["vase"], "vase")
    cases: list[dict[str, Any]] = [
        {"k": 3},
        {"k": 10, "mask": index.mask(["Ben"])},
        {"k": 4, "exclude": ["r7", "r1"]},
    ]
    for case in cases:
        first, exact = _with_and_without_copy(index, vector, "pottery vase", **case)
        assert _same(first, exact)
    assert _ranked(index, vector, "pottery", k=1)[0][0] == "r7"
    saved = pickle.loads(pickle.dumps(index))  # the copy is not saved; it is made again
    assert saved._bf16 is not None
    first, exact = _with_and_without_copy(saved, vector=vector, text="pottery vase", k=5)
    assert _same(first, exact) and _same(first, _ranked(index, vector, "pottery vase", k=5))


@pytest.mark.usefixtures("_copy_from_300_rows")
def test_without_pytorch_the_ranking_reads_the_float32_rows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    index = _space(np.random.default_rng(5), 400, 16)
    vector = index.matrix[9].copy()
    monkeypatch.setattr(bfloat16_rows, "_torch", None)  # still loading, or not installed
    assert index._bf16 is not None and index._bf16.cosines(vector, 400) is None
    assert index._ruled_in(vector, np.arange(400), np.zeros(400, np.float32), BM25, 5) is None
    first, exact = _with_and_without_copy(index, vector=vector, text="river", k=5)
    assert first == exact and len(first) == 5


@pytest.mark.usefixtures("_copy_from_300_rows")
@pytest.mark.parametrize("writes", ["before the product", "after it", "rewrites alone"])
def test_a_commits_drafts_are_ranked_through_one_bfloat16_product(
    monkeypatch: pytest.MonkeyPatch, writes: str
) -> None:
    # a commit's drafts are compared with the space through one product for the batch, on
    # the copy: neither a pass per draft nor the float32 product of the batch; the rows it
    # writes and removes as it goes are read as they are now
    rng = np.random.default_rng(7)
    index = _space(rng, 600, 16)
    drafts = np.stack([index.matrix[40] + 1e-4, index.matrix[41], *_unit(rng, 4, 16)])
    drafts /= np.linalg.norm(drafts, axis=1, keepdims=True)
    products: list[int] = []
    batch = BFloat16Rows.batch

    def counted(self: BFloat16Rows, vectors: np.ndarray, n: int) -> bfloat16_rows.Batch | None:
        products.append(len(vectors))
        return batch(self, vectors, n)

    monkeypatch.setattr(BFloat16Rows, "batch", counted)
    monkeypatch.setattr(
        BFloat16Rows, "cosines", lambda *a: pytest.fail("a pass of its own for a primed draft")
    )
    index.upsert("lone", _Row(participants=["Ben"]), drafts[5], ["chess"], "chess")
    index.prime(drafts)
    if writes != "before the product":
        _ranked(index, drafts[0], "vase", 5)
    if writes != "rewrites alone":
        index.upsert("new", _Row(participants=["Ann"]), drafts[2], ["vase"], "vase")
    index.upsert("r3", _Row(participants=["Ann"]), drafts[3], ["river"], "river")
    index.remove("r41")  # the second draft's own row
    index.remove("lone")  # the last one's, alone in its direction
    exact_index = pickle.loads(pickle.dumps(index))  # unprimed, no copy: the float32 scan
    exact_index._bf16 = None
    rows = np.flatnonzero(index.mask())
    for draft in drafts:
        for k in (1, 5, 10):
            first = _ranked(index, draft, "vase river", k)
            assert _same(first, _ranked(exact_index, draft, "vase river", k))
        (first_at, first_cos), (exact_at, exact_cos) = (
            index.closest(draft, rows),
            exact_index.closest(draft, rows),
        )
        assert first_at == exact_at and first_cos == pytest.approx(exact_cos, abs=1e-6)
    assert products == [len(drafts)]
    assert index._primed is not None and index._primed.product is None
    assert index.ids[rows[index.closest(drafts[3], rows)[0]]] == "r3"
    assert index.ids[rows[index.closest(drafts[1], rows)[0]]] != "r41"
    every = np.arange(len(index.ids))  # the removed rows too: their cosines are 0 now
    for draft in drafts[[1, 5]]:
        assert index.closest(draft, every)[0] == exact_index.closest(draft, every)[0]
    if writes != "rewrites alone":
        assert index.ids[rows[index.closest(drafts[2], rows)[0]]] == "new"
    index.unprime()
    monkeypatch.undo()
    n = every.size
    assert index._ruled_in(drafts[0], every, np.zeros(n, np.float32), BM25, 5) is not None


@pytest.mark.usefixtures("_copy_from_300_rows")
def test_another_threads_vector_is_not_read_from_a_commits_batch() -> None:
    index = _space(np.random.default_rng(10), 400, 16)
    drafts = _unit(np.random.default_rng(11), 2, 16)
    index.prime(drafts)
    seen: list[object] = []
    question = threading.Thread(target=lambda: seen.append(index._column(drafts[0])))
    question.start()
    question.join()
    assert seen == [None]
    assert index._column(drafts[1]) == (index._primed, 1)


@pytest.mark.usefixtures("_copy_from_300_rows")
def test_without_a_first_pass_drafts_read_the_batchs_float32_product(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    index = _space(np.random.default_rng(8), 400, 16)
    drafts = _unit(np.random.default_rng(9), 3, 16)
    monkeypatch.setattr(bfloat16_rows, "_torch", None)  # still loading
    index.prime(drafts)
    ranked = _ranked(index, drafts[1], "river", 5)
    assert index._primed is not None and index._primed.product is not None
    cosines = index.matrix @ drafts[1]
    best = int(np.argmax(cosines))
    row, cosine = index.closest(drafts[1], np.arange(400))
    assert row == best and cosine == pytest.approx(cosines[best])
    index.unprime()
    assert _same(ranked, _ranked(index, drafts[1], "river", 5))


@pytest.mark.usefixtures("_copy_from_300_rows")
def test_a_narrow_mask_is_gathered_without_a_pass() -> None:
    # a quarter of the rows or fewer: their own product costs less than a pass over all
    index = _space(np.random.default_rng(10), 400, 16)
    vector = index.matrix[3].copy()
    for size, passes in ((99, False), (100, True), (400, True)):
        rows = np.arange(size)
        kept = index._ruled_in(vector, rows, np.zeros(size, np.float32), BM25, 5)
        assert (kept is not None) == passes
    narrow = np.zeros(400, dtype=bool)
    narrow[::5] = True
    first, exact = _with_and_without_copy(index, vector, "river", 5, mask=narrow)
    assert first == exact


@pytest.mark.usefixtures("_copy_from_300_rows")
def test_a_failing_kernel_leaves_the_float32_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    index = _space(np.random.default_rng(11), 400, 16)
    vector = index.matrix[4].copy()
    assert index._bf16 is not None
    monkeypatch.setattr(bfloat16_rows, "_torch", bfloat16_rows._torch)  # put back after

    def broken(*args: object) -> None:
        raise RuntimeError("no bfloat16 kernel")

    monkeypatch.setattr(torch, "mm", broken)
    assert index._bf16.cosines(vector, 400) is None
    assert bfloat16_rows._loaded() is None  # not tried again in this process
    assert len(_ranked(index, vector, "river", 5)) == 5


@pytest.mark.usefixtures("_copy_from_300_rows")
def test_a_read_from_the_store_copies_its_rows_once_at_the_end() -> None:
    one_by_one = _space(np.random.default_rng(12), 400, 16)
    deferred: KindIndex[_Row] = KindIndex(16, _people)
    with deferred.copy_deferred():
        for i, row_id in enumerate(one_by_one.ids):
            record, vector = one_by_one.records[i], one_by_one.matrix[i]
            deferred.upsert(row_id, record, vector, ["river"], "river")
        assert deferred._bf16 is None
    assert deferred._bf16 is not None and one_by_one._bf16 is not None
    assert np.array_equal(deferred._bf16._bits[:400], one_by_one._bf16._bits[:400])
    assert np.array_equal(deferred._bf16._error[:400], one_by_one._bf16._error[:400])


def test_below_min_rows_no_copy_is_kept() -> None:
    index = _space(np.random.default_rng(6), 50, 16)
    assert index._bf16 is None
