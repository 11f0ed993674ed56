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
    per index state and settings (`SpaceIndex.derived`), so a query only slices them.

    After a write, the event and turn edges are brought up to date from the previous
    state's (`updated`): only the rows whose edges a change can reach are computed again
    (those of the sessions and events the changed facts and events are in, before and
    after the change) and spliced into the others. The result is the matrices a build from
    scratch gives, entry for entry, without reading every fact record: a question after a
    commit to a 100k-fact space waited 1.7 s at p50 for that rebuild (bench.after_commit)."""

    def __init__(self, index: SpaceIndex, cfg: GraphSettings) -> None:
        # marks taken before anything is read: rows written meanwhile are read again by the
        # next update
        self.marks = (index.facts.changes_mark(), index.events.changes_mark())
        self._entity(index, cfg)
        id_rank = index.fact_arrays(self.size).id_rank
        self._event_facts, self._fact_events = _event_membership(index)
        self.event = _event_edges(
            index, cfg, id_rank, self._event_facts, self._fact_events, None, self.size
        )
        self._turn_entries = _turn_entries(index, np.arange(self.size, dtype=np.int64))
        self.turn = _turn_edges(self._turn_entries, cfg, id_rank, self.size)

    def _entity(self, index: SpaceIndex, cfg: GraphSettings) -> None:
        facts = index.facts
        n = len(facts.ids)
        self.size = n
        self.live = max(len(facts), 1)
        # the postings as one copy, taken in one step: a write on the commit thread can drop
        # a keyword's posting between a listing of the live dict's keys and their lookups
        kw_postings = dict(facts.kw_postings)
        self.keywords = {kw: j for j, kw in enumerate(sorted(kw_postings))}
        # keyword by keyword, each posting's rows in order: the transpose is built first
        postings = [np.sort(kw_postings[kw].arrays()[0]) for kw in self.keywords]
        postings = [held[held < n] for held in postings]  # none written after n was read
        df = np.fromiter((held.size for held in postings), dtype=np.int64, count=len(postings))
        indptr = np.zeros(len(postings) + 1, dtype=np.int64)
        np.cumsum(df, out=indptr[1:])
        rows = np.concatenate(postings) if postings else np.zeros(0, dtype=np.int64)
        shape = (len(self.keywords), n)
        self.incidence_t = _csr(np.ones(rows.size), rows, indptr, shape)
        self.incidence = self.incidence_t.T.tocsr()
        self.df = df
        self.base_weight = np.array(
            [keyword_weight(int(d), self.live, False, cfg) for d in df], dtype=np.float64
        )
        # The entity row of a fact none of whose keywords is in the query does not depend on
        # the query (only a query keyword's ω does): kept, per row, once a query computed it.
        self.plain_entity_rows: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def updated(self, index: SpaceIndex, cfg: GraphSettings) -> Channels:
        """These channels for the index's present state, as a new object (queries may still
        read these): the entity incidence anew, and the event and turn edges of the rows a
        change since these were built can reach. Built from scratch where the index no
        longer records every change since then."""
        facts, events = index.facts, index.events
        marks = (facts.changes_mark(), events.changes_mark())
        changed_facts = facts.changed_since(self.marks[0])
        changed_events = events.changed_since(self.marks[1])
        if changed_facts is None or changed_events is None:
            return Channels(index, cfg)
        out = Channels.__new__(Channels)
        out.marks = marks
        out._entity(index, cfg)
        n = out.size
        id_rank = index.fact_arrays(n).id_rank

        # turn edges: those of every session a changed fact was or is in
        entries = self._turn_entries
        stale = np.isin(entries[0], changed_facts)
        fresh = _turn_entries(index, changed_facts)
        kept = (entries[0][~stale], entries[1][~stale], entries[2][~stale])
        out._turn_entries = (
            np.concatenate((kept[0], fresh[0])),
            np.concatenate((kept[1], fresh[1])),
            np.concatenate((kept[2], fresh[2])),
        )
        redo = np.isin(out._turn_entries[1], np.union1d(entries[1][stale], fresh[1]))
        rows, seqs, positions = out._turn_entries
        block = _turn_edges((rows[redo], seqs[redo], positions[redo]), cfg, id_rank, n)
        out.turn = _splice(self.turn, np.union1d(rows[redo], changed_facts), block, n)

        # event edges: those of every fact in an event that changed or that holds a changed
        # fact, before or after the change
        out._event_facts, out._fact_events = _membership_updated(
            index, self._event_facts, self._fact_events, changed_events
        )
        reached: set[str] = set()
        for e in changed_events.tolist():
            reached.update(self._event_facts.get(e, ()), out._event_facts.get(e, ()))
        for row in changed_facts.tolist():
            fid = facts.ids[row]
            for e in (*self._fact_events.get(fid, ()), *out._fact_events.get(fid, ())):
                reached.update(self._event_facts.get(e, ()), out._event_facts.get(e, ()))
        again = {r for f in reached if (r := facts.rows.get(f, n)) < n}
        again.update(changed_facts.tolist())
        rows = np.fromiter(sorted(again), dtype=np.int64, count=len(again))
        block = _event_edges(index, cfg, id_rank, out._event_facts, out._fact_events, rows, n)
        out.event = _splice(self.event, rows, block, n)
        return out

    def __getstate__(self) -> dict[str, object]:
        """A saved index holds no rows kept for queries: they are filled by query threads
        while the commit thread saves, and pickling a dict that changes size fails."""
        state = dict(self.__dict__)
        state["plain_entity_rows"] = {}
        return state


# The fact ids of each live event, by event row, and the event rows that list each fact id.
_EventFacts = dict[int, tuple[str, ...]]
_FactEvents = dict[str, tuple[int, ...]]
# One entry per (live fact, turn position): its row, session seq and position.
_TurnEntries = tuple[np.ndarray, np.ndarray, np.ndarray]


def _event_membership(index: SpaceIndex) -> tuple[_EventFacts, _FactEvents]:
    events = index.events
    event_facts: _EventFacts = {}
    fact_events: dict[str, list[int]] = {}
    for row in range(len(events.records)):
        if (event := events.live(row)) is not None:
            event_facts[row] = tuple(event.fact_ids)
            for fid in event.fact_ids:
                fact_events.setdefault(fid, []).append(row)
    return event_facts, {f: tuple(rows) for f, rows in fact_events.items()}


def _membership_updated(
    index: SpaceIndex, event_facts: _EventFacts, fact_events: _FactEvents, changed: np.ndarray
) -> tuple[_EventFacts, _FactEvents]:
    """The membership maps with the `changed` event rows read again (new maps: the old
    ones may be read meanwhile)."""
    if not changed.size:
        return event_facts, fact_events
    events = index.events
    out_events = dict(event_facts)
    out_facts = dict(fact_events)
    redo = set(changed.tolist())
    touched: set[str] = set()
    for e in redo:
        touched.update(out_events.pop(e, ()))
        if (event := events.live(e)) is not None:
            out_events[e] = tuple(event.fact_ids)
            touched.update(out_events[e])
    for fid in touched:
        rows = {e for e in out_facts.get(fid, ()) if e not in redo}
        rows.update(e for e in redo if fid in out_events.get(e, ()))
        if rows:
            out_facts[fid] = tuple(sorted(rows))
        else:
            out_facts.pop(fid, None)
    return out_events, out_facts


def _event_edges(
    index: SpaceIndex,
    cfg: GraphSettings,
    id_rank: np.ndarray,
    event_facts: _EventFacts,
    fact_events: _FactEvents,
    rows: np.ndarray | None,
    n: int,
) -> sp.csr_matrix:
    """Σ over shared events of 1/(|F_e| − 1)^α between live members, each row capped at
    max_event_neighbors_per_fact: of every fact, or of `rows` alone (the other rows empty).
    The events are numbered in row order either way, so that each sum adds its terms in
    the same order."""
    facts = index.facts
    if rows is None:
        chosen = sorted(event_facts)
    else:
        wanted: set[int] = set()
        for row in rows.tolist():
            wanted.update(fact_events.get(facts.ids[row], ()))
        chosen = sorted(wanted)
    r_idx, c_idx, weights = [], [], []
    for e in chosen:
        members = event_facts[e]
        w = event_edge_weight(len(members), cfg)
        if w <= 0:
            continue
        weights.append(w)
        for fid in members:
            row = facts.rows.get(fid, n)
            if row < n and facts.alive[row]:
                r_idx.append(row)
                c_idx.append(len(weights) - 1)
    if not r_idx:
        return sp.csr_matrix((n, n))
    membership = sp.csr_matrix((np.ones(len(r_idx)), (r_idx, c_idx)), shape=(n, len(weights)))
    edges = (membership @ sp.diags(weights) @ membership.T).tocoo()
    off = (edges.row != edges.col) & (edges.data > cfg.edge_epsilon)
    if rows is not None:
        only = np.zeros(n, dtype=bool)
        only[rows] = True
        off &= only[edges.row]
    capped = _cap_rows(
        edges.row[off], edges.col[off], edges.data[off],
        cfg.max_event_neighbors_per_fact, id_rank, (n, n),
    )  # fmt: skip
    capped.sort_indices()
    return capped


def _turn_entries(index: SpaceIndex, rows: np.ndarray) -> _TurnEntries:
    """The turn entries of the live facts among `rows`."""
    facts = index.facts
    out_rows, seqs, positions = [], [], []
    for row in rows.tolist():
        if (fact := facts.live(row)) is not None:
            for pos in fact.source.positions:
                out_rows.append(row)
                seqs.append(fact.source.session_seq)
                positions.append(pos)
    return (
        np.asarray(out_rows, dtype=np.int64),
        np.asarray(seqs, dtype=np.int64),
        np.asarray(positions, dtype=np.int64),
    )


def _turn_edges(
    entries: _TurnEntries, cfg: GraphSettings, id_rank: np.ndarray, n: int
) -> sp.csr_matrix:
    """exp(−Δpos/τ) between facts of the same session within the turn window (the closest
    pair of positions counts), each row capped at max_turn_neighbors_per_fact, among the
    facts of `entries` (every entry of their sessions)."""
    if not entries[0].size:
        return sp.csr_matrix((n, n))
    row_arr, key_arr = _turn_line(*entries, cfg.turn_window)
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


def _splice(old: sp.csr_matrix, rows: np.ndarray, block: sp.csr_matrix, n: int) -> sp.csr_matrix:
    """An n × n matrix with the entries of `block` in `rows` and those of `old` (of an
    earlier state, with no more rows) in every other row."""
    replaced = np.zeros(n, dtype=bool)
    replaced[rows] = True
    old_rows = np.repeat(np.arange(old.shape[0]), np.diff(old.indptr))
    keep = ~replaced[old_rows]
    new_rows = np.repeat(np.arange(n), np.diff(block.indptr))
    take = replaced[new_rows]
    at = np.concatenate((old_rows[keep], new_rows[take]))
    order = np.argsort(at, kind="stable")  # two sorted runs: one merge
    indices = np.concatenate((old.indices[keep], block.indices[take]))[order]
    data = np.concatenate((old.data[keep], block.data[take]))[order]
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(at, minlength=n), out=indptr[1:])
    return _csr(data, indices, indptr, (n, n))


def channels(index: SpaceIndex, cfg: GraphSettings) -> Channels:
    """The index's query-independent graph structures, kept per index state and settings and
    brought up to date from the last state's after a write (also called before an index is
    saved, so that they are saved with it)."""
    built: Channels = index.derived(
        "graph-channels",
        cfg.model_dump_json(),
        lambda: Channels(index, cfg),
        lambda previous: previous.updated(index, cfg),
    )
    return built


class LocalGraph:
    """The local graph of one query over one space index."""

    def __init__(self, index: SpaceIndex, query_keywords: Collection[str], cfg: GraphSettings):
        self.cfg = cfg
        self.query = match_keys(query_keywords)
        before = index.facts.mutations
        self._channels = channels(index, cfg)
        self._arrays = index.fact_arrays(self._channels.size)
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
