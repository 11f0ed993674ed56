"""A large kind's rows in bfloat16 beside their float32 matrix, for a ranking's first pass.

A question's primary recall ranks every fact of the space by S_h = alpha·cos + beta·L. At
100k facts the float32 matrix (150 MB) no longer stays in the shared cache and the scan is
bound by memory: a top 5 over every row took 11.0 ms with numpy on one BLAS thread, against
5.0 ms through the bfloat16 copy (half the bytes; PyTorch's kernel, float32 sums, on its two
threads here; 8.3 ms on one) in `bench.first_pass`. The copy's cosines are not exact, but
each one's error has a bound, so the ranking stays exact (`KindIndex.hybrid`): the rows whose
upper bound reaches the k-th best lower bound are the only ones that can make the top k, and
they alone (at most 11 of 100k random rows in `bench.first_pass`) are then scored on the
float32 rows. A commit's drafts go through the same pass together: one product of the batch
with the copy (`batch`; PyTorch's bfloat16 matrix product, which these machines' cores run
on AMX), each draft's bounds made from its own row of it: a batch of 5 drafts ranked for its
top 10 over 100k rows in 14.3 ms against 49.0 through numpy's float32 product of the batch,
64 drafts in 82.2 against 129.4 ms (`python -m bench.first_pass --drafts`).

The bound on |v·x − approx|, for a query v and a row x with copies v', x' (bfloat16):
    v·x − v'·x' = v·(x − x') + (v − v')·x'   ≤ ‖v‖·‖x − x'‖ + ‖v − v'‖·‖x'‖
plus the kernel's own error: products of two bfloat16 values are exact in float32, their
float32 sum is off by at most d·2⁻²⁴·‖v'‖·‖x'‖, and the result is rounded to bfloat16 (half a
unit in the last of its 8 bits: at most 2⁻⁸ of it). And the float32 product the kept rows are
then scored with is itself off by at most d·2⁻²⁴·‖v‖·‖x‖, so the bound covers the distance to
that score too. Each row's ‖x − x'‖ and ‖x'‖ are kept beside it. The bound assumes a kernel
that sums in float32, rounding to nearest, as PyTorch's matrix products do on x86 (AMX's
bfloat16 dot products accumulate in float32, flushing results below 1e-38, far under the
bound's slack); a test checks a question's product and a batch's.

A question's vector goes through the same matrix product as a batch, as a batch of one: on
an AMD EPYC without AMX (avx512_bf16), PyTorch's matrix-vector kernel was the slower of the
two, and primary recall over a 100k-fact space went from 10.74-11.14 to 8.46-9.05 ms at p50
with the product (`bench.first_pass --data-dir`; bench/README, "Round eleven").

The copy is made with numpy (round to nearest even on the float32 bits), so writes need no
PyTorch; PyTorch is imported on a thread of its own the first time a copy is made (over a
second here, and some 190 MB of memory in a process that embeds with ONNX Runtime), and until
it has loaded, rankings read the float32 matrix as before. Where PyTorch is not installed, or
its kernel fails, they always do.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import os
import threading
from types import ModuleType

import numpy as np

log = logging.getLogger(__name__)
# Rows from which a kind keeps a bfloat16 copy. A top k over every row (k = 5, 384
# dimensions, numpy on one BLAS thread), float32 against the first pass, p50 in
# `bench.first_pass` (bench/README.md, "Round seven"), PyTorch on two threads: 10k rows 0.53
# against 0.59 ms, 20k 1.01 against 0.86, 50k 4.94 against 2.42, 100k 11.01 against 4.95; on
# one: 20k 1.00 against 1.09, 50k 5.20 against 4.09, 100k 11.09 against 8.31. The copy costs
# 768 bytes a row.
MIN_ROWS = 20_000

# Relative error of the kernel's result rounded to bfloat16: half a unit in the last place,
# between 2⁻⁹ and 2⁻⁸ of the value (2⁻⁸ of the rounded result covers the value it was rounded
# from). And float32's unit roundoff, for the sums.
_OUTPUT_ROUNDING = 2.0**-8
SUM_ROUNDING = 2.0**-24
# Rows rounded at a time (a block and its temporaries stay in the cache).
_BLOCK = 1024
# What no float32 arithmetic of values of this size reaches (the bounds' own rounding).
_SLACK = 1e-6


class BFloat16Rows:
    """bfloat16 copies of a matrix's rows (the upper half of each float32's bits), each row's
    rounding error ‖x − x'‖ and its copy's norm ‖x'‖, in arrays of the matrix's capacity."""

    def __init__(self, matrix: np.ndarray, capacity: int) -> None:
        dimension = matrix.shape[1]
        self._bits = np.zeros((capacity, dimension), dtype=np.int16)
        self._error = np.zeros(capacity, dtype=np.float32)
        self._norm = np.zeros(capacity, dtype=np.float32)
        self.put(0, matrix)
        _start_import()

    def put(self, start: int, rows: np.ndarray) -> None:
        """Copy `rows` (float32) into rows start, start + 1, ... (in blocks that stay in the
        cache: 100k rows in 0.1-0.35 s, the more when the arrays are first touched; one row
        in 10-20 µs)."""
        for at in range(0, rows.shape[0], _BLOCK):
            block = np.ascontiguousarray(rows[at : at + _BLOCK], dtype=np.float32)
            bits, back = rounded(block)
            where = slice(start + at, start + at + block.shape[0])
            self._bits[where] = bits
            self._norm[where] = _norms(back)
            self._error[where] = _norms(np.subtract(block, back, out=back))

    def grow(self, capacity: int) -> None:
        """Arrays of `capacity` rows, the present rows copied (a reader keeps the old ones)."""
        bits = np.zeros((capacity, self._bits.shape[1]), dtype=np.int16)
        bits[: self._bits.shape[0]] = self._bits
        error = np.zeros(capacity, dtype=np.float32)
        error[: self._error.size] = self._error
        norm = np.zeros(capacity, dtype=np.float32)
        norm[: self._norm.size] = self._norm
        self._bits, self._error, self._norm = bits, error, norm

    def cosines(self, vector: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray] | None:
        """The approximate cosines of `vector` with rows 0..n-1, and a bound on each one's
        distance to the cosine and to its float32 product; None while PyTorch is loading,
        where it is not installed, or once its kernel has failed in this process."""
        first = self.batch(vector[None, :], n)
        return None if first is None else first.row(0)

    def batch(self, vectors: np.ndarray, n: int) -> Batch | None:
        """The approximate cosines of each of `vectors` with rows 0..n-1, in one product (a
        commit's drafts); None as for `cosines`."""
        torch = _loaded()
        if torch is None:
            return None
        bits, error, norm = self._bits, self._error, self._norm  # one state, if one grows
        query_bits, query_back = rounded(vectors)
        try:
            rows = torch.from_numpy(bits[:n]).view(torch.bfloat16)
            query = torch.from_numpy(query_bits).view(torch.bfloat16)
            approx: np.ndarray = torch.mm(query, rows.T).float().numpy()
        except Exception:  # a PyTorch without this kernel: the float32 scan from now on, for
            # every ranking of the process (a question's product too)
            log.exception("the bfloat16 first pass failed; ranking on the float32 rows")
            _disable()
            return None
        vectors = np.asarray(vectors, dtype=np.float32)
        length = _norms(vectors)
        query_error = _norms(vectors - query_back)
        query_norm = _norms(query_back)
        sums = np.float32(bits.shape[1] * SUM_ROUNDING)
        # ‖v‖·‖x − x'‖ + ‖v − v'‖·‖x'‖, the kernel's sum (d·u·‖v'‖·‖x'‖), the float32
        # product over the rows themselves (d·u·‖v‖·‖x‖ ≤ d·u·‖v‖·(‖x'‖ + ‖x − x'‖)), the
        # result's rounding, gathered by each row's two norms
        per_error = (length * (1 + sums)).astype(np.float32)
        per_norm = (query_error + sums * (query_norm + length)).astype(np.float32)
        return Batch(approx.reshape(len(vectors), n), per_error, per_norm, error[:n], norm[:n])


class Batch:
    """Approximate cosines of a batch of vectors with the rows, and what each one's bound
    is made of: the bound of vector j's cosine with row i is
    |approx|·2⁻⁸ + slack + per_error[j]·‖x_i − x_i'‖ + per_norm[j]·‖x_i'‖."""

    def __init__(
        self,
        approx: np.ndarray,
        per_error: np.ndarray,
        per_norm: np.ndarray,
        error: np.ndarray,
        norm: np.ndarray,
    ) -> None:
        self.approx = approx
        self._per_error, self._per_norm = per_error, per_norm
        # the rows' own (views: a row rewritten or removed since the product is computed
        # in float32 instead, `KindIndex._first_pass`)
        self._error, self._norm = error, norm

    def row(self, j: int) -> tuple[np.ndarray, np.ndarray]:
        """Vector j's approximate cosines and their bounds."""
        approx = self.approx[j]
        bound = np.abs(approx)
        bound *= np.float32(_OUTPUT_ROUNDING)
        bound += np.float32(_SLACK)
        bound += self._per_error[j] * self._error
        bound += self._per_norm[j] * self._norm
        return approx, bound


def rounded(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`rows` (float32, at most 1 in size) rounded to bfloat16, to the nearest and ties to
    even: their bits (int16) and their values back in float32."""
    bits = np.ascontiguousarray(rows, dtype=np.float32).view(np.uint32)
    upper = bits >> np.uint32(16)
    upper &= np.uint32(1)
    upper += np.uint32(0x7FFF)
    upper += bits
    upper >>= np.uint32(16)
    kept = upper.astype(np.int16)  # the low 16 bits of each
    upper <<= np.uint32(16)
    return kept, upper.view(np.float32)


def _norms(rows: np.ndarray) -> np.ndarray:
    norms: np.ndarray = np.sqrt(np.einsum("ij,ij->i", rows, rows))
    return norms


_torch: ModuleType | None = None
_importer: threading.Thread | None = None
_import_lock = threading.Lock()


def _loaded() -> ModuleType | None:
    return _torch


def _disable() -> None:
    global _torch
    _torch = None


def _start_import() -> None:
    """Import PyTorch on a thread of its own, once per process, where it is installed."""
    global _importer
    with _import_lock:
        if _importer is not None or importlib.util.find_spec("torch") is None:
            return
        _importer = threading.Thread(target=_import_torch, name="torch-import", daemon=True)
        _importer.start()


def _import_torch() -> None:
    global _torch
    # OpenMP's threads sleep when a parallel region ends (see common/embeddings.py); read
    # when PyTorch loads its OpenMP runtime, which may be before the embedder is made
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        _torch = importlib.import_module("torch")
    except Exception:
        log.exception("PyTorch failed to import; ranking on the float32 rows")


def wait_for_torch(timeout: float | None = None) -> ModuleType | None:
    """PyTorch, once the import the first copy started has finished (started here if none
    was): for tests and benchmarks that time the first pass and not the import."""
    _start_import()
    if _importer is not None:
        _importer.join(timeout)
    return _torch
