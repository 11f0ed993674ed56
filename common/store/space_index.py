"""The per-space in-memory index: vectors as one float32 matrix plus the metadata filters need.

Qdrant is the durable source of truth; verification, event routing, profile matching and
recall read this index instead (a matrix product instead of a local-mode filtered search).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Collection, Hashable, Iterable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, cast

import numpy as np
from pydantic import BaseModel

from common.models.memory import Event, Fact, Profile, TimeRange
from common.postings import Posting
from common.settings import SimilaritySettings
from common.similarity import TextQuery, hybrid_many
from common.store import longlived
from common.store.base import Kind, Store
from common.store.bfloat16_rows import MIN_ROWS, SUM_ROUNDING, Batch, BFloat16Rows
from common.store.packed import Records
from common.text.keywords import match_keys
from common.text.lexical import Bm25, document_terms, query_terms

R = TypeVar("R", bound=BaseModel)
T = TypeVar("T")


@dataclass
class Scored:
    id: str
    score: float
    cosine: float
    lexical: float


class KindIndex(Generic[R]):
    """Rows of one kind of record: vectors, keyword, term (BM25) and participant postings."""

    def __init__(
        self,
        dimension: int,
        people: Callable[[R], Iterable[str]],
        span: Callable[[R], TimeRange | None] | None = None,
    ) -> None:
        self._dim = dimension
        self._people = people
        self._span = span
        # Day ordinals of each row's time span; -1 where unknown.
        self._start = np.full(64, -1, dtype=np.int64)
        self._end = np.full(64, -1, dtype=np.int64)
        self._matrix = np.zeros((64, dimension), dtype=np.float32)
        self.ids: list[str] = []
        self.rows: dict[str, int] = {}
        self.records: Records[R] = Records()
        self.alive = np.zeros(64, dtype=bool)
        self._kw: list[frozenset[str]] = []
        self._kw_len = np.zeros(64, dtype=np.float32)
        self.kw_postings: dict[str, Posting] = {}
        self.people_postings: dict[str, Posting] = {}
        self.lexicon = Bm25()
        self._lexed: dict[int, bytes] = {}  # a digest of what each row's terms are of
        # the last query's lexical scores, while nothing changed: the recall stages of one
        # question read them several times
        self._lexical_memo: tuple[Hashable, np.ndarray] | None = None
        # Moves when an upsert or a removal begins and again when it ends (odd while one is
        # under way): keys the derived caches, and a reader that overlapped a write (another
        # thread of the same worker) keeps nothing it computed then.
        self.mutations = 0
        # A commit's batch of vectors (`prime`) and the rows rewritten since: its drafts are
        # compared with the whole space through one product for the batch.
        self._primed: _Primed | None = None
        self._rewritten: set[int] = set()
        # The rows written or removed, in order, after the first `dropped` of them: what a
        # structure derived from an earlier state reads to update only those rows
        # (`changed_since`). One tuple, swapped whole when its oldest half is dropped.
        self._changes: tuple[int, list[int]] = (0, [])
        # The rows in bfloat16 once there are MIN_ROWS of them: a top-k's first pass.
        self._bf16: BFloat16Rows | None = None
        self._copy_deferred = False

    def __len__(self) -> int:
        return int(self.alive[: len(self.ids)].sum())

    def __contains__(self, item_id: object) -> bool:
        return (
            isinstance(item_id, str)
            and item_id in self.rows
            and bool(self.alive[self.rows[item_id]])
        )

    @property
    def matrix(self) -> np.ndarray:
        return self._matrix[: len(self.ids)]

    def get(self, item_id: str) -> R:
        return self.records[self.rows[item_id]]

    def live(self, row: int) -> R | None:
        """The record of `row`; None where it is removed. A reader on another thread than
        the writer's may find a row removed between two reads of it: it reads the record
        once, through this, and drops a None."""
        return self.records[row] if self.alive[row] else None

    def find(self, item_id: str) -> R | None:
        """The record of `item_id`, read once (`live`); None where there is none."""
        row = self.rows.get(item_id)
        return None if row is None else self.live(row)

    def vector(self, item_id: str) -> np.ndarray:
        row: np.ndarray = self._matrix[self.rows[item_id]]
        return row

    def items(self) -> list[R]:
        return [r for i in range(len(self.records)) if (r := self.live(i)) is not None]

    def _grow(self) -> None:
        cap = self._matrix.shape[0] * 2
        matrix = np.zeros((cap, self._dim), dtype=np.float32)
        matrix[: len(self.ids)] = self.matrix
        self._matrix = matrix
        self.alive = np.concatenate([self.alive, np.zeros(cap - self.alive.size, dtype=bool)])
        self._kw_len = np.concatenate(
            [self._kw_len, np.zeros(cap - self._kw_len.size, dtype=np.float32)]
        )
        pad = np.full(cap - self._start.size, -1, dtype=np.int64)
        self._start = np.concatenate([self._start, pad])
        self._end = np.concatenate([self._end, pad])
        if self._bf16 is not None:
            self._bf16.grow(cap)

    def __getstate__(self) -> dict[str, object]:
        """A saved index (common/store/snapshots.py) holds no per-query cache (the last
        query's text stays in memory only), and of the matrix only the rows in use."""
        state = dict(self.__dict__)
        state["_lexical_memo"] = None
        state["_primed"] = None
        state["_rewritten"] = set()
        state["_matrix"] = self._matrix[: len(self.ids)]
        state["_bf16"] = None  # made again from the matrix
        state["_changes"] = (self.changes_mark(), [])
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        used = state["_matrix"]
        capacity = state["alive"].size  # the capacity every per-row array was saved with
        state["_matrix"] = np.zeros((capacity, used.shape[1]), dtype=np.float32)
        state["_matrix"][: used.shape[0]] = used
        self.__dict__.update(state)
        self._make_copy()

    def _unindex(self, row: int) -> None:
        self.lexicon.clear(row)
        self._lexed.pop(row, None)
        for kw in self._kw[row]:
            _discard(self.kw_postings, kw, row)
        for person in self._people(self.records[row]):
            _discard(self.people_postings, person, row)

    def upsert(
        self,
        item_id: str,
        record: R,
        vector: np.ndarray,
        keywords: Collection[str],
        text: str,
    ) -> None:
        """Add or replace a row; `text` and `keywords` are what BM25 indexes for it. A
        replaced row touches only the postings whose keys it gains or loses."""
        self.mutations += 1
        row = self.rows.get(item_id)
        old_kws: frozenset[str] = frozenset()
        old_people: set[str] = set()
        if row is None:
            if len(self.ids) == self._matrix.shape[0]:
                self._grow()
            row = len(self.ids)
            self.ids.append(item_id)
            self.rows[item_id] = row
            self.records.append(record)
            self._kw.append(frozenset())
        else:
            if self.alive[row]:
                old_kws = self._kw[row]
                old_people = set(self._people(self.records[row]))
            self.records[row] = record
            if self._primed is not None and row < self._primed.known:
                self._rewritten.add(row)
        self._matrix[row] = vector
        self._copy_row(row)
        self.alive[row] = True
        span = self._span(record) if self._span else None
        self._start[row] = span.start.toordinal() if span else -1
        self._end[row] = span.end.toordinal() if span else -1
        kws = match_keys(keywords)
        self._kw[row] = kws
        self._kw_len[row] = len(kws)
        for kw in old_kws - kws:
            _discard(self.kw_postings, kw, row)
        for kw in kws - old_kws:
            self.kw_postings.setdefault(kw, Posting()).put(row)
        source = _digest(text, keywords)
        if self._lexed.get(row) != source:  # a record rewritten with its text (a fact
            self._lexed[row] = source  # joining an event) keeps its terms
            self.lexicon.set(row, document_terms(text, keywords))
        people = set(self._people(record))
        for person in old_people - people:
            _discard(self.people_postings, person, row)
        for person in people - old_people:
            self.people_postings.setdefault(person, Posting()).put(row)
        self._lexical_memo = None
        self._note(row)
        self.mutations += 1

    def _note(self, row: int) -> None:
        dropped, rows = self._changes
        rows.append(row)
        if len(rows) > _CHANGES_KEPT:
            half = len(rows) // 2
            self._changes = (dropped + half, rows[half:])

    def changes_mark(self) -> int:
        """How many row writes and removals there have been: a mark for `changed_since`."""
        dropped, rows = self._changes
        return dropped + len(rows)

    def changed_since(self, mark: int) -> np.ndarray | None:
        """The rows written or removed since `changes_mark()` gave `mark`, sorted; None
        when the record of them no longer reaches back that far."""
        dropped, rows = self._changes
        if mark < dropped:
            return None
        return np.unique(np.asarray(rows[mark - dropped :], dtype=np.int64))

    def _copy_row(self, row: int) -> None:
        """Keep the bfloat16 copy of `row`, or make the copy of every row once there are
        MIN_ROWS (not while a read from the store defers it to its end). Only the writer
        calls this: the copy is made and kept in step with the matrix by the thread that
        writes it."""
        if self._bf16 is not None:
            self._bf16.put(row, self._matrix[row : row + 1])
        elif not self._copy_deferred:
            self._make_copy()

    def _make_copy(self) -> None:
        """The bfloat16 copy of every row, where there are MIN_ROWS."""
        if len(self.ids) >= MIN_ROWS:
            self._bf16 = BFloat16Rows(self.matrix, self._matrix.shape[0])

    @contextmanager
    def copy_deferred(self) -> Iterator[None]:
        """Rows written inside are copied to bfloat16 at the end, all at once: a space read
        from the store copies its rows in blocks, not one by one (10-20 µs a row)."""
        self._copy_deferred = True
        try:
            yield
        finally:
            self._copy_deferred = False
            if self._bf16 is None:
                self._make_copy()

    def remove(self, item_id: str) -> None:
        """Take a row out and forget its content (text, keywords, vector): an erased record
        leaves nothing in memory that a saved index would keep. Its id keeps its row, so a
        later upsert of the same id revives it."""
        row = self.rows.get(item_id)
        if row is None or not self.alive[row]:
            return
        self.mutations += 1
        self._unindex(row)
        self.alive[row] = False
        self.records[row] = None
        self._kw[row] = frozenset()
        self._kw_len[row] = 0
        self._matrix[row] = 0.0
        self._copy_row(row)
        if self._primed is not None and row < self._primed.known:
            self._rewritten.add(row)
        self._lexical_memo = None
        self._note(row)
        self.mutations += 1

    def prime(self, vectors: np.ndarray) -> None:
        """Prepare the cosines of `vectors` (one per row) against every row now, for this
        thread: the first ranking of any of them makes one product for them all, on the
        bfloat16 copy where the kind keeps one and PyTorch has loaded by then (else on the
        float32 matrix), and the others read it instead of the matrix. Rows written or
        removed meanwhile are read as they are now."""
        table = {_key(v): j for j, v in enumerate(vectors)}
        self._primed = _Primed(len(self.ids), table, vectors)
        self._rewritten = set()

    def unprime(self) -> None:
        self._primed = None
        self._rewritten = set()

    def cosines(self, vector: np.ndarray) -> np.ndarray:
        """The cosine of `vector` with every row (rows are unit vectors)."""
        found = self._column(vector)
        if found is None:
            cos: np.ndarray = self.matrix @ vector
            return cos
        primed, column = found
        known = primed.known
        if primed.product is None:  # rows written since priming are read below, as they are now
            # One row per primed vector: each read is then contiguous (a column of a
            # row-major product touches a cache line per row: at 100k facts, a tenth of
            # the drain thread's time).
            primed.product = np.ascontiguousarray(
                primed.vectors @ self._matrix[:known].T, dtype=np.float32
            )
        n = len(self.ids)
        out = np.empty(n, dtype=np.float32)
        out[:known] = primed.product[column]
        since = self._since(primed, n)
        out[since] = self._matrix[since] @ vector
        return out

    def _column(self, vector: np.ndarray) -> tuple[_Primed, int] | None:
        """The batch `vector` was primed in and its place there, on the thread that primed
        it (another thread's vectors, a question's, are ranked on their own)."""
        primed = self._primed
        if primed is None or primed.thread != threading.get_ident():
            return None
        column = primed.table.get(_key(vector))
        return None if column is None else (primed, column)

    def _since(self, primed: _Primed, n: int) -> np.ndarray:
        """The rows written or removed since `primed` was made: those rewritten and those
        past the rows it knew."""
        rewritten = np.fromiter(tuple(self._rewritten), dtype=np.int64)
        return np.concatenate([rewritten, np.arange(primed.known, n, dtype=np.int64)])

    def mask(self, people: Collection[str] | None = None) -> np.ndarray:
        """Live rows, restricted to those sharing a participant when `people` is given."""
        n = len(self.ids)
        alive = self.alive[:n].copy()
        if people is None:
            return alive
        hit = np.zeros(n, dtype=bool)
        for person in people:
            posting = self.people_postings.get(person)
            if posting:
                hit[_before(posting.arrays()[0], n)] = True
        return alive & hit

    def time_compatible(self, mask: np.ndarray, span: TimeRange | None) -> np.ndarray:
        """`mask` without rows whose known time span is disjoint from `span`."""
        if span is None:
            return mask
        n = len(self.ids)
        start, end = self._start[:n], self._end[:n]
        ok = (start < 0) | ((start <= span.end.toordinal()) & (span.start.toordinal() <= end))
        return mask & ok

    def jaccard(self, keywords: Collection[str]) -> np.ndarray:
        """Jaccard(keywords, row keywords) for every row, through the postings; keywords
        compare by their match keys (stems)."""
        n = len(self.ids)
        inter = np.zeros(n, dtype=np.float32)
        query = match_keys(keywords)
        for kw in query:
            posting = self.kw_postings.get(kw)
            if posting:
                inter[_before(posting.arrays()[0], n)] += 1.0
        union = self._kw_len[:n] + len(query) - inter
        share: np.ndarray = np.divide(
            inter, union, out=np.zeros(n, dtype=np.float32), where=union > 0
        )
        return share

    def bm25(
        self, query: TextQuery, weights: SimilaritySettings, rows: np.ndarray | None = None
    ) -> np.ndarray:
        """L(query, row) for every row (for `rows` alone when given): BM25 over the space's
        IDF, scaled to [0, 1]."""
        return self.lexicon.normalised(
            query_terms(query.text, query.keywords),
            len(self.ids),
            weights.bm25_k1,
            weights.bm25_b,
            rows,
        )

    def _lexical_at(
        self, query: TextQuery, weights: SimilaritySettings, rows: np.ndarray
    ) -> np.ndarray:
        """The lexical channel for `rows`: read from each row's own terms when they are few
        against the postings a scan would read (a commit's candidates in a large space),
        else from the scan of every row (kept for the other stages of one question)."""
        memo = self._lexical_memo
        key = (self.mutations, query, weights.lexical, weights.bm25_k1, weights.bm25_b)
        scores: np.ndarray
        if memo is not None and memo[0] == key and memo[1].size == len(self.ids):
            scores = memo[1][rows]
            return scores
        if weights.lexical == "bm25":
            terms = query_terms(query.text, query.keywords)
            if rows.size * max(len(terms), 1) * _ROW_READ < self.lexicon.scan_cost(terms):
                return self.bm25(query, weights, rows)
        scores = self.lexical(query, weights)[rows]
        return scores

    def cosines_at(self, vector: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """The cosine of `vector` with `rows`: their own product when they are few, else
        read from the product with every row (a gather of most of a large matrix costs more
        than the product)."""
        found = self._column(vector)
        computed = found is not None and found[0].product is not None
        out: np.ndarray
        if computed or _GATHER * rows.size >= len(self.ids):
            out = self.cosines(vector)[rows]
        else:
            out = self._matrix[rows] @ vector
        return out

    def lexical(self, query: TextQuery, weights: SimilaritySettings) -> np.ndarray:
        """The lexical channel of S_h for every row, as `weights.lexical` chooses."""
        before = self.mutations
        key = (before, query, weights.lexical, weights.bm25_k1, weights.bm25_b)
        memo = self._lexical_memo
        if memo is not None and memo[0] == key and memo[1].size == len(self.ids):
            return memo[1]
        if weights.lexical == "jaccard":
            scores = self.jaccard(query.keywords)
        else:
            scores = self.bm25(query, weights)
        scores.setflags(write=False)
        if before % 2 == 0 and self.mutations == before and scores.size == len(self.ids):
            self._lexical_memo = (key, scores)  # no write overlapped the computation
        return scores

    def hybrid(
        self,
        vector: np.ndarray,
        query: TextQuery,
        weights: SimilaritySettings,
        mask: np.ndarray,
        k: int | None = None,
        exclude: Collection[str] = (),
    ) -> list[Scored]:
        """Rows in `mask` ranked by S_h with `query` (descending, ties by insertion order)."""
        if not len(self.ids):
            return []
        mask = mask.copy()
        for item_id in exclude:
            if item_id in self.rows:
                mask[self.rows[item_id]] = False
        rows = np.flatnonzero(mask)
        if rows.size == 0:
            return []
        lex = self._lexical_at(query, weights, rows)
        if k is not None and (kept := self._ruled_in(vector, rows, lex, weights, k)) is not None:
            rows, lex = rows[kept], lex[kept]
        cos = self.cosines_at(vector, rows)
        score = hybrid_many(cos, lex, weights)
        order = _top_order(score, rows, k)
        return [
            Scored(self.ids[rows[i]], float(score[i]), float(cos[i]), float(lex[i])) for i in order
        ]

    def _ruled_in(
        self,
        vector: np.ndarray,
        rows: np.ndarray,
        lex: np.ndarray,
        weights: SimilaritySettings,
        k: int,
    ) -> np.ndarray | None:
        """Positions in `rows` of those that the bfloat16 first pass cannot rule out of the
        top k by S_h: a row whose score's upper bound is below the k-th best lower bound has
        k rows surely above it. Every row of the exact top k (ties at its boundary included)
        is kept (the bound covers the float32 product they are then scored with), so ranking
        the kept rows gives the same top k, but for rows whose scores agree to float32's
        last bits: a product over a few rows may round them differently from the product
        over all. None where no first pass runs (`_first_pass`), a top k as large as
        `rows`, or no cosine in S_h (alpha 0)."""
        if rows.size <= k or weights.alpha <= 0:
            return None
        first = self._first_pass(vector, rows)
        if first is None:
            return None
        approx, bound = first
        base = hybrid_many(approx, lex, weights)
        # the float32 arithmetic of the scores, compared here and ranked below, within _SLACK
        reach = np.float32(weights.alpha) * bound + np.float32(_SLACK)
        low = base - reach
        floor = np.partition(low, low.size - k)[low.size - k]
        kept: np.ndarray = np.flatnonzero(base + reach >= floor)
        return kept

    def _first_pass(
        self, vector: np.ndarray, rows: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """The bfloat16 copy's cosines of `vector` with `rows` and a bound on each one's
        distance to the cosine and to the float32 product it is then scored with (arrays
        that may be kept for the next call: not to be written to). A vector this thread
        primed reads its row of the batch's product; the rows written or removed since are
        computed in float32, their bound what two float32 products of a row can differ by.
        None where no pass runs: no copy, PyTorch still loading, or `rows` few enough to
        gather (a narrow participant or time mask: 500 rows of 100k take 0.04 ms, a pass
        2-4 ms)."""
        copy = self._bf16
        n = len(self.ids)
        if copy is None or _GATHER * rows.size < n:
            return None
        found = self._column(vector)
        if found is None:
            first = copy.cosines(vector, n)
        else:
            primed, column = found
            first = primed.first_pass(copy, column)
            since = self._since(primed, n)
            if first is not None and since.size:
                approx, bound = _extended(first[0], n), _extended(first[1], n)
                written = self._matrix[since]
                approx[since] = written @ vector
                sums = np.float32(2 * self._dim * SUM_ROUNDING * np.linalg.norm(vector))
                bound[since] = sums * np.linalg.norm(written, axis=1)
                first = approx, bound
        if first is None:
            return None
        return first if rows.size == n else (first[0][rows], first[1][rows])

    def closest(self, vector: np.ndarray, rows: np.ndarray) -> tuple[int, float]:
        """The position in `rows` (not empty) of the row closest to `vector`, the first of
        equal ones, and its cosine. Through the first pass where one runs: only the rows
        whose upper bound reaches the best lower bound are read in float32."""
        first = self._first_pass(vector, rows)
        kept = np.arange(rows.size)
        if first is not None:
            approx, bound = first
            floor = np.max(approx - bound)
            kept = np.flatnonzero(approx + bound + np.float32(_SLACK) >= floor)
        cos = self.cosines_at(vector, rows[kept])
        best = int(np.argmax(cos))
        return int(kept[best]), float(cos[best])


# Relative costs behind the choice between reading some rows and scanning all of them: a
# row's terms read one by one in Python against a posting entry scanned by numpy, and the
# rows gathered out of the matrix against those multiplied in place.
_ROW_READ = 16
_GATHER = 4
# Row changes a kind keeps for `changed_since`: a structure further behind is built again.
_CHANGES_KEPT = 1 << 16
# A margin on S_h's float32 arithmetic (values of about 1), beyond the first pass's bound.
_SLACK = 1e-6


def _discard(postings: dict[str, Posting], key: str, row: int) -> None:
    """`row` out of `key`'s posting, and the key out of the postings once nothing holds it
    (an erased record's keywords and names do not outlive it)."""
    rows = postings.get(key)
    if rows is not None:
        rows.drop(row)
        if not rows:
            del postings[key]


def _digest(text: str, keywords: Iterable[str]) -> bytes:
    """What a row's BM25 terms are made of, in 16 bytes (a saved index keeps no second copy
    of every text)."""
    joined = "\x1f".join([str(len(text)), text, *keywords])
    return hashlib.blake2b(joined.encode(), digest_size=16).digest()


def _before(rows: np.ndarray, n: int) -> np.ndarray:
    """`rows` less than `n` (a posting read while another thread appends past a reader's n):
    the max is one pass where the filter is two and a copy (a speaker's posting holds most
    of a space: at 100k rows, 0.03 against 0.33 ms)."""
    if not rows.size or rows.max() < n:
        return rows
    kept: np.ndarray = rows[rows < n]
    return kept


def _key(vector: np.ndarray) -> bytes:
    return np.ascontiguousarray(vector, dtype=np.float32).tobytes()


def _extended(values: np.ndarray, n: int) -> np.ndarray:
    """`values` followed by room for the rows past them, up to `n`."""
    out = np.empty(n, dtype=np.float32)
    out[: values.size] = values
    return out


@dataclass
class _Primed:
    """A commit's batch of vectors (`KindIndex.prime`) against the rows that existed then
    (`known`): one product for the batch, made when the first of them is ranked, on the
    bfloat16 copy (`batch`) or, where no first pass runs, on the float32 matrix
    (`product`; both where the first pass is not asked, an alpha of 0). Only the thread
    that primed it (`thread`) reads or fills it."""

    known: int
    table: dict[bytes, int]
    vectors: np.ndarray
    thread: int = field(default_factory=threading.get_ident)
    product: np.ndarray | None = None
    batch: Batch | None = None
    tried: bool = False  # the bfloat16 product was asked for (None: PyTorch not ready)
    # the last vector's row of it with its bounds (a draft is ranked a few times in a row)
    last: tuple[int, tuple[np.ndarray, np.ndarray]] | None = None

    def first_pass(self, copy: BFloat16Rows, column: int) -> tuple[np.ndarray, np.ndarray] | None:
        """The batch's approximate cosines of vector `column` and their bounds."""
        if not self.tried:
            self.tried = True
            self.batch = copy.batch(self.vectors, self.known)
        if self.batch is None:
            return None
        last = self.last
        if last is None or last[0] != column:
            last = self.last = column, self.batch.row(column)
        return last[1]


def _top_order(score: np.ndarray, rows: np.ndarray, k: int | None) -> np.ndarray:
    """Positions of the k best scores, descending, ties by row; only the entries that can
    make the top k (every tie at the boundary included) are sorted."""
    if k is not None and k < score.size:
        boundary = np.partition(score, score.size - k)[score.size - k]
        candidates = np.flatnonzero(score >= boundary)
        order = candidates[np.lexsort((rows[candidates], -score[candidates]))]
        return order[:k]
    return np.lexsort((rows, -score))


def _fact_people(fact: Fact) -> list[str]:
    return fact.participants


def _fact_span(fact: Fact) -> TimeRange | None:
    return fact.time.event


def _event_span(event: Event) -> TimeRange | None:
    return event.time_span


def _event_people(event: Event) -> list[str]:
    return event.participants


def _profile_people(profile: Profile) -> list[str]:
    return [profile.person]


class FactArrays:
    """Array forms of the fact rows for the graph stage: each row's participants as bits (a
    row × 64-person words matrix: whether two rows share a person is one AND per word) and
    each row's rank by fact id (for tie-breaks).
    Valid while the facts do not change; `SpaceIndex.fact_arrays` brings it up to date when
    they do (`updated`)."""

    def __init__(self, facts: KindIndex[Fact]) -> None:
        self.mark = facts.changes_mark()  # before anything is read
        n = len(facts.ids)
        people_postings = dict(facts.people_postings)  # one step: see graph.Channels
        self.persons = sorted(people_postings)
        self.people = np.zeros((n, max((len(self.persons) + 63) // 64, 1)), dtype=np.uint64)
        for j, person in enumerate(self.persons):
            rows = np.fromiter(people_postings[person], dtype=np.int64)
            self.people[rows[rows < n], j // 64] |= np.uint64(1 << (j % 64))
        self.has_people: np.ndarray = np.any(self.people != 0, axis=1)
        # the ids in order, and the row of each
        self._ids = np.array(sorted(facts.ids[:n]), dtype=object)
        self._by_id = np.array(sorted(range(n), key=facts.ids.__getitem__), dtype=np.int64)
        self.id_rank = np.empty(n, dtype=np.int64)
        self.id_rank[self._by_id] = np.arange(n)

    def updated(self, facts: KindIndex[Fact]) -> FactArrays:
        """These arrays for the facts' present state, as a new object (readers may hold
        these): the rows written or removed since read again and the new ids ranked among
        the others, where the facts name the same persons as when these were made (a
        person's bit is their place in name order); built from scratch where they do not, or
        where the facts no longer record every change since."""
        mark = facts.changes_mark()
        changed = facts.changed_since(self.mark)
        n, before = len(facts.ids), self.people.shape[0]
        if changed is None or sorted(facts.people_postings) != self.persons:
            return FactArrays(facts)
        if not changed.size and n == before:
            return self  # only the events changed
        out = FactArrays.__new__(FactArrays)
        out.mark, out.persons = mark, self.persons
        out.people = np.zeros((n, self.people.shape[1]), dtype=np.uint64)
        out.people[:before] = self.people
        bit = {person: j for j, person in enumerate(self.persons)}
        for row in changed[changed < n].tolist():
            out.people[row] = 0
            if (fact := facts.live(row)) is not None:
                for person in set(_fact_people(fact)):
                    j = bit.get(person, -1)
                    if j < 0:  # a person new since the check: written meanwhile
                        return FactArrays(facts)
                    out.people[row, j // 64] |= np.uint64(1 << (j % 64))
        out.has_people = np.any(out.people != 0, axis=1)
        added = sorted(range(before, n), key=facts.ids.__getitem__)  # new ids: rows before..n-1
        new_ids = [facts.ids[r] for r in added]
        new_rows = np.array(added, dtype=np.int64)
        at = np.searchsorted(self._ids, np.array(new_ids, dtype=object))
        out._ids = np.insert(self._ids, at, np.array(new_ids, dtype=object))
        out._by_id = np.insert(self._by_id, at, new_rows)
        out.id_rank = np.empty(n, dtype=np.int64)
        out.id_rank[out._by_id] = np.arange(n)
        return out


@dataclass
class SpaceIndex:
    """Everything of one space that the hot paths compare against."""

    tenant: str
    space: str
    dimension: int
    version: int = 0
    facts: KindIndex[Fact] = field(init=False)
    events: KindIndex[Event] = field(init=False)
    profiles: KindIndex[Profile] = field(init=False)

    def __post_init__(self) -> None:
        self._derived: dict[str, tuple[Hashable, Any]] = {}
        # facts waiting for the profile batch: found without reading every fact of the space
        self._profile_pending: set[str] = set()
        self._stale_events: set[str] = set()  # events whose summary lags their facts
        self.facts = KindIndex(self.dimension, _fact_people, _fact_span)
        self.events = KindIndex(self.dimension, _event_people, _event_span)
        self.profiles = KindIndex(self.dimension, _profile_people)

    def fact_arrays(self, rows: int = 0) -> FactArrays:
        """The graph stage's array view of the facts, brought up to date after a change, of
        at least `rows` rows. A question reads the index while the commit thread writes it:
        the arrays kept for the state it finds may have been read before a fact that the
        caller counted was added; they are read again then."""
        arrays: FactArrays = self.derived(
            "fact-arrays",
            None,
            lambda: FactArrays(self.facts),
            lambda previous: previous.updated(self.facts),
        )
        return arrays if arrays.people.shape[0] >= rows else arrays.updated(self.facts)

    def __getstate__(self) -> dict[str, object]:
        """A saved index keeps only the derived structures of its present state: one built
        before an erasure could still name what was erased."""
        state = dict(self.__dict__)
        now = (self.facts.mutations, self.events.mutations)
        state["_derived"] = {
            name: cached
            for name, cached in self._derived.items()
            if cast(tuple[Any, ...], cached[0])[:2] == now
        }
        return state

    def derived(
        self,
        name: str,
        key: Hashable,
        build: Callable[[], T],
        update: Callable[[T], T] | None = None,
    ) -> T:
        """A structure computed from this index (and `key`, e.g. the settings it used), kept
        until the facts, the events or `key` change. With `update`, one kept for the same
        `key` and an earlier state of the index is brought up to date from it instead of
        built again (`update` makes a new one: readers may still hold the earlier)."""
        state = (self.facts.mutations, self.events.mutations, key)
        cached = self._derived.get(name)
        if cached is None or cached[0] != state:
            if update is not None and cached and cast(tuple[Any, ...], cached[0])[2] == key:
                cached = (state, update(cast(T, cached[1])))
            else:
                cached = (state, build())
            self._derived[name] = cached
        return cast(T, cached[1])

    def put_fact(self, fact: Fact, vector: np.ndarray) -> None:
        self.facts.upsert(fact.id, fact, vector, fact.keywords, fact.text)
        if fact.profile_pending:
            self._profile_pending.add(fact.id)
        else:
            self._profile_pending.discard(fact.id)

    def remove_fact(self, fact_id: str) -> None:
        self.facts.remove(fact_id)
        self._profile_pending.discard(fact_id)

    def profile_pending(self) -> list[Fact]:
        """The facts waiting for the profile batch, in the order they were said (session,
        turn, then id): the batch's profiles then do not depend on whether its facts were
        committed in this process or read back from the store after a restart, whose rows
        come in the store's order."""
        facts = [self.facts.records[self.facts.rows[f]] for f in self._profile_pending]
        return sorted(facts, key=_said_order)

    def put_event(self, event: Event, vector: np.ndarray) -> None:
        self.events.upsert(event.id, event, vector, event.keywords, event.summary)
        if event.stale:
            self._stale_events.add(event.id)
        else:
            self._stale_events.discard(event.id)

    def remove_event(self, event_id: str) -> None:
        self.events.remove(event_id)
        self._stale_events.discard(event_id)

    def stale_events(self) -> list[str]:
        """The events whose summary lags their facts, in the order they were stored."""
        return sorted(self._stale_events, key=self.events.rows.__getitem__)

    def put_profile(self, profile: Profile, vector: np.ndarray) -> None:
        self.profiles.upsert(profile.id, profile, vector, profile.keywords, profile.content)

    @classmethod
    def load(cls, store: Store, tenant: str, space: str, dimension: int) -> SpaceIndex:
        """Read a space's facts, events and profiles (with vectors) from the store."""
        index = cls(tenant=tenant, space=space, dimension=dimension)
        with longlived.building(), ExitStack() as deferred:
            for kind in (index.facts, index.events, index.profiles):
                deferred.enter_context(kind.copy_deferred())
            index._read(store)
        return index

    def _read(self, store: Store) -> None:
        tenant, space = self.tenant, self.space
        for point in store.scroll(Kind.FACTS, tenant, space, with_vectors=True):
            assert point.vector is not None
            self.put_fact(Fact.model_validate(point.payload), point.vector)
        for point in store.scroll(Kind.EVENTS, tenant, space, with_vectors=True):
            assert point.vector is not None
            self.put_event(Event.model_validate(point.payload), point.vector)
        for point in store.scroll(Kind.PROFILES, tenant, space, with_vectors=True):
            assert point.vector is not None
            self.put_profile(Profile.model_validate(point.payload), point.vector)


class SpaceIndexCache:
    """Indexes of recently used spaces, least recently used dropped past `capacity`."""

    def __init__(self, capacity: int = 32) -> None:
        self._capacity = capacity
        self._items: OrderedDict[tuple[str, str], SpaceIndex] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, tenant: str, space: str) -> SpaceIndex | None:
        key = (tenant, space)
        with self._lock:
            index = self._items.get(key)
            if index is not None:
                self._items.move_to_end(key)
        return index

    def put(self, index: SpaceIndex) -> None:
        key = (index.tenant, index.space)
        with self._lock:
            self._items[key] = index
            self._items.move_to_end(key)
            while len(self._items) > self._capacity:
                self._items.popitem(last=False)

    def drop(self, tenant: str, space: str) -> None:
        with self._lock:
            self._items.pop((tenant, space), None)


def _said_order(fact: Fact) -> tuple[int, int, str]:
    return fact.source.session_seq, min(fact.source.positions, default=-1), fact.id
