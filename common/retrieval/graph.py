"""The local multi-channel fact graph around the seeds (entity, event and turn edges).

Built from the space index (keyword postings, event membership, turn positions), so a
query makes no store round trip for its neighbours.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Collection
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from common.retrieval.ppr import mix_channels, random_walk_with_restart, restart_vector
from common.settings import GraphSettings
from common.store.space_index import SpaceIndex


def frequency_penalty(df_ratio: float, is_query: bool, cfg: GraphSettings) -> float:
    """π(k) = (τ / max(df/N, τ))^γ, floored for query keywords (Appendix A.3.1)."""
    if is_query:
        base = (
            cfg.query_penalty_tau / max(df_ratio, cfg.query_penalty_tau)
        ) ** cfg.query_penalty_gamma
        return max(cfg.query_penalty_floor, base)
    tau = cfg.non_query_penalty_tau
    return (tau / max(df_ratio, tau)) ** cfg.non_query_penalty_gamma


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
    return 1.0 / (size - 1) ** cfg.event_size_alpha


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


class LocalGraph:
    """Neighbour lookups over one space index for one query."""

    def __init__(self, index: SpaceIndex, query_keywords: Collection[str], cfg: GraphSettings):
        self.index = index
        self.cfg = cfg
        self.query = set(query_keywords)
        facts = index.facts
        self.n = max(len(facts), 1)
        self._kw_weight: dict[str, float] = {}
        self._turns = index.turn_map()
        self._arrays = index.fact_arrays()

    def weight(self, keyword: str) -> float:
        if keyword not in self._kw_weight:
            df = len(self.index.facts.kw_postings.get(keyword, ()))
            self._kw_weight[keyword] = keyword_weight(df, self.n, keyword in self.query, self.cfg)
        return self._kw_weight[keyword]

    def _weighted_keywords(self, row: int) -> list[tuple[str, float]]:
        out = []
        for kw in self.index.facts.records[row].keywords:
            w = self.weight(kw)
            if w > self.cfg.edge_epsilon:
                out.append((kw, w))
        return out

    def _gate(self, row: int, others: np.ndarray) -> np.ndarray:
        """Person gate: no edge between facts about disjoint sets of people."""
        arrays = self._arrays
        if not arrays.has_people[row]:
            return np.ones(others.size, dtype=bool)
        shares = (arrays.people[others] & arrays.people[row]).any(axis=1)
        return shares | ~arrays.has_people[others]

    def entity_neighbours(self, row: int) -> dict[int, float]:
        """Facts sharing keywords with `row`, weighted by Σ ω(k) over the shared keywords;
        the heaviest max_neighbors_per_fact after the person gate."""
        weighted = self._weighted_keywords(row)
        if not weighted:
            return {}
        postings = [self._arrays.postings(kw) for kw, _ in weighted]
        rows = np.concatenate(postings)
        if rows.size == 0:
            return {}
        weights = np.repeat([w for _, w in weighted], [p.size for p in postings])
        others, inverse = np.unique(rows, return_inverse=True)
        sums = np.bincount(inverse, weights=weights)
        keep = (others != row) & self._gate(row, others)
        others, sums = others[keep], sums[keep]
        order = np.lexsort((self._arrays.id_rank[others], -sums))[: self.cfg.max_neighbors_per_fact]
        return dict(zip(others[order].tolist(), sums[order].tolist(), strict=True))

    def local_entity_matrix(self, local: list[int]) -> sp.csr_matrix:
        """Entity edges among the local nodes: Σ ω(k) over shared keywords, person-gated,
        each row capped at its max_neighbors_per_fact heaviest (ties by fact id)."""
        size = len(local)
        columns: dict[str, int] = {}
        r_idx, c_idx, vals = [], [], []
        for i, row in enumerate(local):
            for kw, w in self._weighted_keywords(row):
                r_idx.append(i)
                c_idx.append(columns.setdefault(kw, len(columns)))
                vals.append(np.sqrt(w))
        if not vals:
            return sp.csr_matrix((size, size))
        incidence = sp.csr_matrix((vals, (r_idx, c_idx)), shape=(size, len(columns)))
        weights = (incidence @ incidence.T).toarray()
        np.fill_diagonal(weights, 0.0)
        rows = np.asarray(local, dtype=np.int64)
        people = self._arrays.people[rows].astype(np.int32)
        has = self._arrays.has_people[rows]
        allowed = ((people @ people.T) > 0) | ~has[:, None] | ~has[None, :]
        weights[~allowed] = 0.0
        cap = self.cfg.max_neighbors_per_fact
        if size > cap:
            # rank every row's entries by weight, then fact id; zero all past the cap
            ranks = self._arrays.id_rank[rows]
            order = np.lexsort((np.broadcast_to(ranks, weights.shape), -weights), axis=1)
            drop = order[:, cap:]
            weights[np.arange(size)[:, None], drop] = 0.0
        weights[weights <= self.cfg.edge_epsilon] = 0.0
        return sp.csr_matrix(weights)

    def event_neighbours(self, row: int) -> dict[int, float]:
        out: dict[int, float] = defaultdict(float)
        facts, events = self.index.facts, self.index.events
        for eid in facts.records[row].event_ids:
            if eid not in events:
                continue
            members = events.get(eid).fact_ids
            w = event_edge_weight(len(members), self.cfg)
            if w <= 0:
                continue
            for fid in members:
                other = facts.rows.get(fid)
                if other is not None and other != row and facts.alive[other]:
                    out[other] += w
        return _top(out, self.cfg.max_event_neighbors_per_fact, self.index.facts.ids)

    def turn_neighbours(self, row: int) -> dict[int, float]:
        source = self.index.facts.records[row].source
        out: dict[int, float] = {}
        by_pos = self._turns.get(source.session_seq, {})
        for p in source.positions:
            for d in range(0, self.cfg.turn_window + 1):
                for q in {p - d, p + d}:
                    for other in by_pos.get(q, ()):
                        if other != row:
                            out[other] = max(out.get(other, 0.0), turn_edge_weight(d, self.cfg))
        return _top(out, self.cfg.max_turn_neighbors_per_fact, self.index.facts.ids)

    def run(self, seed_rows: list[int], seed_scores: np.ndarray) -> GraphResult:
        """Expand ≤ max_hops from the seeds up to max_local_nodes, then RWR."""
        cfg = self.cfg
        nodes: dict[int, int] = {}
        for row in seed_rows:
            nodes.setdefault(row, len(nodes))
        neighbours: dict[int, tuple[dict[int, float], dict[int, float]]] = {}
        frontier = list(nodes)
        ids = self.index.facts.ids
        for _ in range(cfg.max_hops):
            following = []
            for row in frontier:
                if len(nodes) >= cfg.max_local_nodes:
                    break
                entity = self.entity_neighbours(row)
                neighbours[row] = (self.event_neighbours(row), self.turn_neighbours(row))
                combined: dict[int, float] = defaultdict(float)
                for rho, chan in zip(
                    (cfg.rho_keyword, cfg.rho_event, cfg.rho_turn),
                    (entity, *neighbours[row]),
                    strict=True,
                ):
                    total = sum(chan.values()) or 1.0
                    for v, w in chan.items():
                        combined[v] += rho * w / total
                for v in sorted(combined, key=lambda x: (-combined[x], ids[x])):
                    if len(nodes) >= cfg.max_local_nodes:
                        break
                    if v not in nodes:
                        nodes[v] = len(nodes)
                        following.append(v)
            frontier = following
        local = list(nodes)
        mats = [self.local_entity_matrix(local)]
        size = len(local)
        for c in range(2):
            r_idx, c_idx, vals = [], [], []
            for row, i in nodes.items():
                if row not in neighbours:
                    neighbours[row] = (self.event_neighbours(row), self.turn_neighbours(row))
                for v, w in neighbours[row][c].items():
                    j = nodes.get(v)
                    if j is not None and w > cfg.edge_epsilon:
                        r_idx.append(i)
                        c_idx.append(j)
                        vals.append(w)
            mats.append(sp.csr_matrix((vals, (r_idx, c_idx)), shape=(size, size)))
        edges = sum(int(m.nnz) for m in mats)
        transition = mix_channels(mats, (cfg.rho_keyword, cfg.rho_event, cfg.rho_turn))
        restart = np.zeros(size)
        restart[: len(seed_scores)] = restart_vector(seed_scores, cfg.seed_score_power)
        activation = random_walk_with_restart(
            transition, restart, cfg.restart_prob, cfg.max_iter, cfg.tol
        )
        return GraphResult(rows=local, activation=activation, edges=edges)


def _top(weights: dict[int, float], k: int, ids: list[str]) -> dict[int, float]:
    """The k heaviest neighbours; ties go by fact id, so the choice does not depend on the
    order in which this process's index happened to receive the facts."""
    if len(weights) <= k:
        return dict(weights)
    keep = sorted(weights, key=lambda v: (-weights[v], ids[v]))[:k]
    return {v: weights[v] for v in keep}
