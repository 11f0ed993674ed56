"""The local multi-channel fact graph around the seeds (entity, event and turn edges).

Built from the space index (keyword postings, event membership, turn positions), so a
query makes no store round trip for its neighbours.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from common.retrieval.ppr import mix_channels, random_walk_with_restart, restart_vector
from common.settings import GraphSettings
from common.store.space_index import SpaceIndex
from common.text.keywords import match_key, match_keys


def frequency_penalty(df_ratio: float, is_query: bool, cfg: GraphSettings) -> float:
    """π(k) = (τ / max(df/N, τ))^γ, floored for query keywords (Appendix A.3.1)."""
    if is_query:
        base = (
            cfg.query_penalty_tau / max(df_ratio, cfg.query_penalty_tau)
        ) ** cfg.query_penalty_gamma
        return max(cfg.query_penalty_floor, float(base))
    tau = cfg.non_query_penalty_tau
    return float((tau / max(df_ratio, tau)) ** cfg.non_query_penalty_gamma)


def keyword_weight(df: int, n: int, is_query: bool, cfg: GraphSettings) -> float:
    """ω(k) = IDF(k) · β_q(k) · π(k), with IDF = ln(N / df)."""
    if df <= 0 or n <= 0:
        return 0.0
    idf = math.log(n / df)
    if idf <= 0:
        return 0.0
    boost = cfg.query_keyword_boost if is_query else 1.0
    return idf * boost * frequency_penalty(df / n, is_query, cfg)


def event_edge_weight(size: int, cfg: GraphSettings) -> float:
    """1 / (|F_e| − 1)^α for an event of `size` facts; 0 past the maximum size."""
    if size < 2 or (cfg.max_event_size is not None and size > cfg.max_event_size):
        return 0.0
    return float(1.0 / (size - 1) ** cfg.event_size_alpha)


def turn_edge_weight(distance: int, cfg: GraphSettings) -> float:
    """exp(−Δpos / τ) within the window, 0 beyond it."""
    if distance < 0 or distance > cfg.turn_window:
        return 0.0
    return math.exp(-distance / cfg.tau_turn)


@dataclass
class GraphResult:
    rows: list[int]  # fact rows of the local graph, seeds first
    activation: np.ndarray  # RWR activation per local node
    edges: int
    # the local graph's weighted edges per channel (keyword, event, turn), in local order
    channels: tuple[sp.csr_matrix, ...] = ()


_EXPAND_BATCH = 8
_PLAIN_ROWS_KEPT = 20_000


def _cap_rows(
    i: np.ndarray,
    j: np.ndarray,
    w: np.ndarray,
    cap: int,
    id_rank: np.ndarray,
    shape: tuple[int, int],
) -> sp.csr_matrix:
    """The (i, j, w) entries (no duplicate pairs) as a CSR matrix keeping each row's `cap`
    heaviest, ties by the fact id of the column, so the result does not depend on the order
    facts reached the index. Within a row, entries stay heaviest first."""
    order = np.lexsort((id_rank[j], -w, i))
    i, j, w = i[order], j[order], w[order]
    within = np.arange(i.size) - np.searchsorted(i, i, side="left")
    keep = within < cap
    i, j, w = i[keep], j[keep], w[keep]
    indptr = np.zeros(shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(i, minlength=shape[0]), out=indptr[1:])
    return _csr(w, j, indptr, shape)


def _cap_local(
    i: np.ndarray, j: np.ndarray, w: np.ndarray, cap: int, id_rank: np.ndarray, n: int
) -> sp.csr_matrix:
    """`_cap_rows` for a local graph of `n` nodes with (i, j, w) sorted by row: the same
    entries are kept, with a row's entries in their given order. Only the rows over the
    cap are cut, all at once on a dense block of them whose columns run in fact-id order,
    so a row's cap-th weight (its boundary) is one partition and ties at it go to the
    smaller ids. On a local graph of a few hundred nodes this costs a fraction of sorting
    every entry by three keys."""
    over = np.bincount(i, minlength=n) > cap
    if over.any():
        cut = over[i]
        slot = np.cumsum(over) - 1  # a row over the cap -> its row in the block
        column = np.empty(n, dtype=np.int64)
        column[np.argsort(id_rank, kind="stable")] = np.arange(n)
        at = (slot[i[cut]], column[j[cut]])
        block = np.zeros((int(over.sum()), n))
        block[at] = w[cut]
        boundary = -np.partition(-block, cap - 1, axis=1)[:, cap - 1 : cap]
        above = block > boundary
        ties = block == boundary
        room = cap - above.sum(axis=1, keepdims=True)
        kept = above | (ties & (np.cumsum(ties, axis=1) <= room))
        keep = ~cut
        keep[cut] = kept[at]
        i, j, w = i[keep], j[keep], w[keep]
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(i, minlength=n), out=indptr[1:])
    return _csr(w, j, indptr, (n, n))


class Channels:
    """The query-independent parts of the graph for one state of a space index: the
    fact × keyword incidence with each keyword's df and non-query weight ω, and the event
    and turn edges of every fact, already capped per row. Built with sparse products once
    per index state and settings (`SpaceIndex.derived`), so a query only slices them."""

    def __init__(self, index: SpaceIndex, cfg: GraphSettings) -> None:
        facts = index.facts
        n = len(facts.ids)
        self.size = n
        self.live = max(len(facts), 1)
        arrays = index.fact_arrays()
        id_rank = arrays.id_rank
        self.keywords = {kw: j for j, kw in enumerate(sorted(facts.kw_postings))}
        r_idx: list[int] = []
        c_idx: list[int] = []
        df = np.zeros(len(self.keywords), dtype=np.int64)
        for kw, j in self.keywords.items():
            posting = facts.kw_postings[kw]
            df[j] = len(posting)
            r_idx.extend(posting)
            c_idx.extend([j] * len(posting))
        ones = np.ones(len(r_idx))
        self.incidence = sp.csr_matrix((ones, (r_idx, c_idx)), shape=(n, len(self.keywords)))
        self.incidence_t = self.incidence.T.tocsr()
        self.df = df
        self.base_weight = np.array(
            [keyword_weight(int(d), self.live, False, cfg) for d in df], dtype=np.float64
        )
        self.event = self._event_edges(index, cfg, id_rank)
        self.turn = self._turn_edges(index, cfg, id_rank)
        # The entity row of a fact none of whose keywords is in the query does not depend on
        # the query (only a query keyword's ω does): kept, per row, once a query computed it.
        self.plain_entity_rows: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def __getstate__(self) -> dict[str, object]:
        """A saved index holds no rows kept for queries: they are filled by query threads
        while the commit thread saves, and pickling a dict that changes size fails."""
        state = dict(self.__dict__)
        state["plain_entity_rows"] = {}
        return state

    @staticmethod
    def _event_edges(index: SpaceIndex, cfg: GraphSettings, id_rank: np.ndarray) -> sp.csr_matrix:
        """Σ over shared events of 1/(|F_e| − 1)^α between live members, each row capped at
        max_event_neighbors_per_fact."""
        facts, events = index.facts, index.events
        n = len(facts.ids)
        r_idx, c_idx, weights = [], [], []
        for event in events.items():
            w = event_edge_weight(len(event.fact_ids), cfg)
            if w <= 0:
                continue
            weights.append(w)
            for fid in event.fact_ids:
                row = facts.rows.get(fid)
                if row is not None and facts.alive[row]:
                    r_idx.append(row)
                    c_idx.append(len(weights) - 1)
        if not r_idx:
            return sp.csr_matrix((n, n))
        membership = sp.csr_matrix((np.ones(len(r_idx)), (r_idx, c_idx)), shape=(n, len(weights)))
        edges = (membership @ sp.diags(weights) @ membership.T).tocoo()
        off = (edges.row != edges.col) & (edges.data > cfg.edge_epsilon)
        capped = _cap_rows(
            edges.row[off], edges.col[off], edges.data[off],
            cfg.max_event_neighbors_per_fact, id_rank, (n, n),
        )  # fmt: skip
        capped.sort_indices()
        return capped

    @staticmethod
    def _turn_edges(index: SpaceIndex, cfg: GraphSettings, id_rank: np.ndarray) -> sp.csr_matrix:
        """exp(−Δpos/τ) between facts of the same session within the turn window (the
        closest pair of positions counts), each row capped at max_turn_neighbors_per_fact."""
        facts = index.facts
        n = len(facts.ids)
        rows, seqs, positions = [], [], []  # one entry per (live fact, turn position)
        for row, fact in enumerate(facts.records):
            if facts.alive[row]:
                for pos in fact.source.positions:
                    rows.append(row)
                    seqs.append(fact.source.session_seq)
                    positions.append(pos)
        if not rows:
            return sp.csr_matrix((n, n))
        row_arr, key_arr = _turn_line(
            np.asarray(rows, dtype=np.int64),
            np.asarray(seqs, dtype=np.int64),
            np.asarray(positions, dtype=np.int64),
            cfg.turn_window,
        )
        parts_i: list[np.ndarray] = []
        parts_j: list[np.ndarray] = []
        parts_w: list[np.ndarray] = []
        for d in range(cfg.turn_window + 1):
            weight = turn_edge_weight(d, cfg)
            if weight <= cfg.edge_epsilon:
                continue
            lo = np.searchsorted(key_arr, key_arr + d, side="left")
            hi = np.searchsorted(key_arr, key_arr + d, side="right")
            counts = hi - lo
            src = np.repeat(row_arr, counts)
            dst = row_arr[_ranges(lo, counts)]
            parts_i += [src, dst]
            parts_j += [dst, src]
            parts_w += [np.full(src.size * 2, weight)]
        i, j, w = np.concatenate(parts_i), np.concatenate(parts_j), np.concatenate(parts_w)
        off = i != j
        i, j, w = i[off], j[off], w[off]
        # the closest positions of a pair give its weight: keep the heaviest duplicate
        order = np.lexsort((-w, j, i))
        i, j, w = i[order], j[order], w[order]
        first = np.ones(i.size, dtype=bool)
        first[1:] = (i[1:] != i[:-1]) | (j[1:] != j[:-1])
        cap = cfg.max_turn_neighbors_per_fact
        capped = _cap_rows(i[first], j[first], w[first], cap, id_rank, (n, n))
        capped.sort_indices()
        return capped


def channels(index: SpaceIndex, cfg: GraphSettings) -> Channels:
    """The index's query-independent graph structures, built once per index state and
    settings (also called before an index is saved, so that they are saved with it)."""
    return index.derived("graph-channels", cfg.model_dump_json(), lambda: Channels(index, cfg))


class LocalGraph:
    """The local graph of one query over one space index."""

    def __init__(self, index: SpaceIndex, query_keywords: Collection[str], cfg: GraphSettings):
        self.cfg = cfg
        self.query = match_keys(query_keywords)
        before = index.facts.mutations
        self._arrays = index.fact_arrays()
        self._channels = channels(index, cfg)
        # rows kept for later queries only when both were read from one state of the facts
        self._keep_rows = before % 2 == 0 and index.facts.mutations == before
        ch = self._channels
        omega = ch.base_weight.copy()
        self._query_columns = np.zeros(len(ch.keywords), dtype=bool)
        for kw in self.query:
            j = ch.keywords.get(kw)
            if j is not None:
                omega[j] = keyword_weight(int(ch.df[j]), ch.live, True, cfg)
                self._query_columns[j] = True
        omega[omega <= cfg.edge_epsilon] = 0.0
        self._omega = omega

    def weight(self, keyword: str) -> float:
        """ω(k) of this query for a keyword of the space."""
        j = self._channels.keywords.get(match_key(keyword))
        return float(self._omega[j]) if j is not None else 0.0

    def _sums(self, rows: np.ndarray, among_themselves: bool) -> sp.csr_matrix:
        """Σ ω(k) over shared keywords from each of `rows` to every fact (or only to the other
        `rows`, columns then being positions in `rows`), one CSR row per row."""
        ch = self._channels
        left = _take_rows(ch.incidence, rows)
        # the local block is the slice's own transpose, taken before `left` is weighted
        right = left.T.tocsr() if among_themselves else ch.incidence_t
        left.data = left.data * self._omega[left.indices]
        left.eliminate_zeros()  # a keyword weighing nothing reaches no neighbour
        sums: sp.csr_matrix = left @ right
        return sums

    def _gated(self, source: np.ndarray, targets: np.ndarray, data: np.ndarray) -> np.ndarray:
        """Which (source, target, weight) entries are edges: no self-edge, above ε, and
        between facts that share a person (or where one names nobody)."""
        arrays = self._arrays
        shares = ((arrays.people[source] & arrays.people[targets]) != 0).any(axis=1)
        gate = shares | ~arrays.has_people[source] | ~arrays.has_people[targets]
        keep: np.ndarray = (source != targets) & gate & (data > self.cfg.edge_epsilon)
        return keep

    def _entity_edges(
        self, rows: np.ndarray, among_themselves: bool
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The person-gated entity edges of `rows` as (row position, column, weight)."""
        sums = self._sums(rows, among_themselves)
        position = np.repeat(np.arange(rows.size), np.diff(sums.indptr))
        columns, data = sums.indices, sums.data
        targets = rows[columns] if among_themselves else columns
        keep = self._gated(rows[position], targets, data)
        return position[keep], columns[keep], data[keep]

    def entity_rows(self, rows: list[int]) -> sp.csr_matrix:
        """Entity neighbours of each of `rows` over the whole space: the heaviest
        max_neighbors_per_fact after the person gate, ties by fact id.

        A fact sharing a common keyword has thousands of candidates; each row's are gated
        heaviest first, in growing slices, until the cap is met by candidates no lighter
        than every one left out (the whole row when it never is). The rows whose first slice
        would hold them whole are gated together, in one call."""
        at = np.asarray(rows, dtype=np.int64)
        sums = self._sums(at, among_themselves=False)
        cap = self.cfg.max_neighbors_per_fact
        first = 2 * cap + 1
        counts = np.diff(sums.indptr)
        position = np.repeat(np.arange(at.size), counts)
        whole = (counts <= first)[position]
        keep_whole = whole.copy()
        keep_whole[whole] = self._gated(at[position[whole]], sums.indices[whole], sums.data[whole])
        parts_i = [position[keep_whole]]
        parts_j = [sums.indices[keep_whole]]
        parts_w = [sums.data[keep_whole]]
        for pos in np.flatnonzero(counts > first).tolist():
            row = int(at[pos])
            lo, hi = int(sums.indptr[pos]), int(sums.indptr[pos + 1])
            columns, data = sums.indices[lo:hi], sums.data[lo:hi]
            take = first
            while True:
                if take < data.size:
                    boundary = np.partition(data, data.size - take)[data.size - take]
                    chosen = np.flatnonzero(data >= boundary)  # every tie at the boundary
                else:
                    chosen = np.arange(data.size)
                keep = chosen[self._gated(np.full(chosen.size, row), columns[chosen], data[chosen])]
                if chosen.size == data.size or keep.size >= cap:
                    break  # all read, or the cap met by edges no lighter than the rest
                take *= 4
            parts_i.append(np.full(keep.size, pos))
            parts_j.append(columns[keep])
            parts_w.append(data[keep])
        i, j, w = (np.concatenate(p) for p in (parts_i, parts_j, parts_w))
        shape = (len(rows), self._channels.size)
        return _cap_rows(
            i.astype(np.int64), j.astype(np.int64), w, cap, self._arrays.id_rank, shape
        )

    def entity_of(self, rows: list[int]) -> list[tuple[np.ndarray, np.ndarray]]:
        """`entity_rows` of each of `rows` as its (columns, weights), heaviest first. A row
        none of whose keywords is in the query is the same for every query: it is read from
        (or kept in) the index state's plain rows, up to `_PLAIN_ROWS_KEPT` of them."""
        ch = self._channels
        inc = ch.incidence
        plain = [
            not self._query_columns[inc.indices[inc.indptr[r] : inc.indptr[r + 1]]].any()
            for r in rows
        ]
        kept = ch.plain_entity_rows
        cached = {r: v for r, p in zip(rows, plain, strict=True) if p and (v := kept.get(r))}
        missing = [r for r in rows if r not in cached]
        found: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        if missing:
            matrix = self.entity_rows(missing)
            for pos, r in enumerate(missing):
                found[r] = _row(matrix, pos)
            if self._keep_rows:
                if len(kept) > _PLAIN_ROWS_KEPT:
                    kept.clear()  # a bound on memory: rows queried since the space changed
                for r, p in zip(rows, plain, strict=True):
                    if p and r in found:  # copies: a view would keep its batch's arrays
                        found[r] = kept[r] = (found[r][0].copy(), found[r][1].copy())
        return [cached[r] if r in cached else found[r] for r in rows]

    def entity_neighbours(self, row: int) -> dict[int, float]:
        return _row_dict(self.entity_rows([row]), 0)

    def event_neighbours(self, row: int) -> dict[int, float]:
        return _row_dict(self._channels.event, row)

    def turn_neighbours(self, row: int) -> dict[int, float]:
        return _row_dict(self._channels.turn, row)

    def _ranked_neighbours(
        self, entity: tuple[np.ndarray, np.ndarray], row: int, rhos: tuple[float, ...]
    ) -> list[int]:
        """A node's neighbours over the three channels, by Σ_c ρ_c · its row-normalised edge
        weight (the channels added in order), heaviest first, ties by fact id."""
        ch = self._channels
        combined: dict[int, float] = {}  # a few dozen entries: plain Python beats array calls
        for rho, (indices, data) in zip(
            rhos, (entity, _row(ch.event, row), _row(ch.turn, row)), strict=True
        ):
            if indices.size:
                share = rho * data / data.sum()
                for v, w in zip(indices.tolist(), share.tolist(), strict=True):
                    combined[v] = combined.get(v, 0.0) + w
        keys = list(combined)
        ranks = self._arrays.id_rank[keys].tolist()
        weights = [-combined[v] for v in keys]
        return [v for _, _, v in sorted(zip(weights, ranks, keys, strict=True))]

    def local_entity_matrix(self, local: list[int]) -> sp.csr_matrix:
        """Entity edges among the local nodes: Σ ω(k) over shared keywords, person-gated,
        each row capped at its max_neighbors_per_fact heaviest (ties by fact id)."""
        rows = np.asarray(local, dtype=np.int64)
        i, j, w = self._entity_edges(rows, among_themselves=True)
        cap = self.cfg.max_neighbors_per_fact
        return _cap_local(i, j, w, cap, self._arrays.id_rank[rows], len(local))

    def run(self, seed_rows: list[int], seed_scores: np.ndarray) -> GraphResult:
        """Expand ≤ max_hops from the seeds up to max_local_nodes, then RWR."""
        cfg = self.cfg
        ch = self._channels
        nodes: dict[int, int] = {}
        for row in seed_rows:
            nodes.setdefault(row, len(nodes))
        frontier = list(nodes)
        rhos = (cfg.rho_keyword, cfg.rho_event, cfg.rho_turn)
        for _ in range(cfg.max_hops):
            following: list[int] = []
            # frontier rows in small batches: the node cap usually stops a hop early
            for at in range(0, len(frontier), _EXPAND_BATCH):
                if len(nodes) >= cfg.max_local_nodes:
                    break
                batch = frontier[at : at + _EXPAND_BATCH]
                entity = self.entity_of(batch)
                for f, row in enumerate(batch):
                    if len(nodes) >= cfg.max_local_nodes:
                        break
                    for v in self._ranked_neighbours(entity[f], row, rhos):
                        if len(nodes) >= cfg.max_local_nodes:
                            break
                        if v not in nodes:
                            nodes[v] = len(nodes)
                            following.append(v)
            frontier = following
        local = np.fromiter(nodes, dtype=np.int64, count=len(nodes))
        mats = [
            self.local_entity_matrix(local.tolist()),
            _submatrix(ch.event, local),
            _submatrix(ch.turn, local),
        ]
        edges = sum(int(m.nnz) for m in mats)
        transition = mix_channels(mats, rhos)
        restart = np.zeros(local.size)
        restart[: len(seed_scores)] = restart_vector(seed_scores, cfg.seed_score_power)
        activation = random_walk_with_restart(
            transition, restart, cfg.restart_prob, cfg.max_iter, cfg.tol
        )
        return GraphResult(
            rows=local.tolist(), activation=activation, edges=edges, channels=tuple(mats)
        )


def _turn_line(
    rows: np.ndarray, seqs: np.ndarray, positions: np.ndarray, window: int
) -> tuple[np.ndarray, np.ndarray]:
    """The entries sorted by (session, position), each with a key on one line where two
    entries lie within `window` exactly when they share a session and their positions do:
    steps between neighbours are their position gap, capped at window + 1, and window + 1
    between sessions. Keys stay below entries × (window + 1), whatever the orders (a seq up
    to 2**53, a start time in seconds) and positions."""
    order = np.lexsort((positions, seqs))
    rows, seqs, positions = rows[order], seqs[order], positions[order]
    steps = np.minimum(np.diff(positions), window + 1)
    steps[seqs[1:] != seqs[:-1]] = window + 1
    return rows, np.concatenate(([0], np.cumsum(steps)))


def _ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The positions start, start+1, …, start+count−1 of every (start, count), concatenated."""
    offsets = np.repeat(starts - (np.cumsum(counts) - counts), counts)
    return offsets + np.arange(int(counts.sum()))


_INT32_MAX = np.iinfo(np.int32).max


def _csr(
    data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, shape: tuple[int, int]
) -> sp.csr_matrix:
    """A CSR matrix of these arrays, its indices and indptr 32-bit where they fit (as scipy
    makes them): scipy checks the contents of 64-bit ones on every construction and copies
    them (35 against 22 µs for a local graph's matrix of 1,500 entries)."""
    if max(shape, default=0) <= _INT32_MAX and indices.size <= _INT32_MAX:
        indices = indices.astype(np.int32, copy=False)
        indptr = indptr.astype(np.int32, copy=False)
    return sp.csr_matrix((data, indices, indptr), shape=shape)


def _take_rows(matrix: sp.csr_matrix, rows: np.ndarray) -> sp.csr_matrix:
    """matrix[rows]: the rows in the order given, each with its entries in stored order, as
    scipy's fancy indexing gives them, without its checks and copies (a tenth of the graph
    stage on a LoCoMo space)."""
    lo = matrix.indptr[rows]
    counts = matrix.indptr[rows + 1] - lo
    take = _ranges(lo, counts)
    indptr = np.zeros(rows.size + 1, dtype=matrix.indptr.dtype)
    np.cumsum(counts, out=indptr[1:])
    shape = (rows.size, matrix.shape[1])
    return _csr(matrix.data[take], matrix.indices[take], indptr, shape)


def _submatrix(matrix: sp.csr_matrix, local: np.ndarray) -> sp.csr_matrix:
    """matrix[local][:, local] in one pass over the rows' entries: rows and columns renumbered
    to their positions in `local`, entries kept in stored order (scipy's two fancy-indexing
    steps give the same matrix, at several times the cost for a graph this small)."""
    position = np.full(matrix.shape[1], -1, dtype=np.int64)
    position[local] = np.arange(local.size)
    lo, hi = matrix.indptr[local], matrix.indptr[local + 1]
    counts = hi - lo
    take = _ranges(lo, counts)
    columns = position[matrix.indices[take]]
    keep = columns >= 0
    rows = np.repeat(np.arange(local.size), counts)[keep]
    indptr = np.zeros(local.size + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=local.size), out=indptr[1:])
    shape = (local.size, local.size)
    return _csr(matrix.data[take][keep], columns[keep], indptr, shape)


def _row(matrix: sp.csr_matrix, row: int) -> tuple[np.ndarray, np.ndarray]:
    lo, hi = matrix.indptr[row], matrix.indptr[row + 1]
    return matrix.indices[lo:hi], matrix.data[lo:hi]


def _row_dict(matrix: sp.csr_matrix, row: int) -> dict[int, float]:
    lo, hi = matrix.indptr[row], matrix.indptr[row + 1]
    return dict(zip(matrix.indices[lo:hi].tolist(), matrix.data[lo:hi].tolist(), strict=True))
