"""PPR, channel mixing and edge weights on small hand-built graphs (Eq. 7-11, A.3.1)."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest
import scipy.sparse as sp

from common.retrieval.graph import (
    event_edge_weight,
    frequency_penalty,
    keyword_weight,
    turn_edge_weight,
)
from common.retrieval.ppr import (
    fuse_ranks,
    mix_channels,
    random_walk_with_restart,
    restart_vector,
)
from common.settings import GraphSettings
from tests.helpers.records import turn_fact

CFG = GraphSettings()


def test_rwr_matches_the_closed_form_without_dangling_nodes() -> None:
    w = np.array([[0, 2, 1], [1, 0, 1], [3, 1, 0]], dtype=float)
    p_mat = w / w.sum(axis=1, keepdims=True)
    restart = np.array([0.7, 0.3, 0.0])
    eta = 0.34
    closed = eta * np.linalg.solve(np.eye(3) - (1 - eta) * p_mat.T, restart)
    r = random_walk_with_restart(p_mat, restart, eta, max_iter=500, tol=1e-12)
    np.testing.assert_allclose(r, closed, atol=1e-9)
    assert r.sum() == pytest.approx(1.0)


def test_dangling_mass_returns_to_the_restart_vector() -> None:
    # node 2 has no out-edges: its mass goes back to p, so total mass stays 1
    p_mat = np.array([[0, 1, 0], [0, 0, 1], [0, 0, 0]], dtype=float)
    restart = np.array([1.0, 0.0, 0.0])
    eta = 0.34
    r = random_walk_with_restart(p_mat, restart, eta, max_iter=1000, tol=1e-14)
    # closed form with the dangling row replaced by the restart distribution
    fixed = p_mat.copy()
    fixed[2] = restart
    closed = eta * np.linalg.solve(np.eye(3) - (1 - eta) * fixed.T, restart)
    np.testing.assert_allclose(r, closed, atol=1e-9)
    assert r.sum() == pytest.approx(1.0)


def test_rwr_stops_at_max_iter() -> None:
    p_mat = np.array([[0, 1.0], [1.0, 0]])
    r1 = random_walk_with_restart(p_mat, np.array([1.0, 0.0]), 0.34, max_iter=1, tol=0.0)
    np.testing.assert_allclose(r1, [0.34, 0.66])


def test_channels_are_row_normalised_and_mixed_with_per_node_renormalised_priors() -> None:
    entity = sp.csr_matrix(np.array([[0, 2, 2], [1, 0, 0], [0, 0, 0]], dtype=float))
    event = sp.csr_matrix(np.array([[0, 0, 5], [0, 0, 0], [1, 0, 0]], dtype=float))
    turn = sp.csr_matrix((3, 3))
    mixed = mix_channels([entity, event, turn], [0.45, 0.40, 0.15])
    # node 0 has entity and event edges: priors 0.45/0.85 and 0.40/0.85
    np.testing.assert_allclose(
        mixed[0], [0, 0.45 / 0.85 * 0.5, 0.45 / 0.85 * 0.5 + 0.40 / 0.85 * 1.0]
    )
    np.testing.assert_allclose(mixed[1], [1.0, 0, 0])  # entity only: its prior becomes 1
    np.testing.assert_allclose(mixed[2], [1.0, 0, 0])  # event only
    np.testing.assert_allclose(mixed.sum(axis=1), [1, 1, 1])


def test_mixing_adds_an_entry_a_channel_stores_twice() -> None:
    # row 0 holds column 1 twice (1 + 2) and column 0 once; row 1 holds column 0
    twice = sp.csr_matrix(
        (np.array([1.0, 2.0, 1.0, 4.0]), np.array([1, 1, 0, 0]), np.array([0, 3, 4])), shape=(2, 2)
    )
    empty = sp.csr_matrix((2, 2))
    mixed = mix_channels([twice, empty, empty], [0.45, 0.40, 0.15])
    np.testing.assert_allclose(mixed, [[0.25, 0.75], [1.0, 0.0]])


def test_dense_mixing_and_walk_agree_with_the_sparse_formulas_on_random_graphs() -> None:
    rng = np.random.default_rng(2)
    rhos = [0.45, 0.40, 0.15]
    for _ in range(30):
        n = int(rng.integers(2, 200))
        channels = [
            sp.random(n, n, density=float(d), random_state=rng, format="csr")
            for d in rng.uniform(0.0, 0.1, size=3)
        ]
        dense = [c.toarray() for c in channels]
        sums = np.stack([d.sum(axis=1) for d in dense], axis=1)
        weights = (sums > 0) * np.asarray(rhos)
        totals = weights.sum(axis=1, keepdims=True)
        weights = np.divide(weights, totals, out=np.zeros_like(weights), where=totals > 0)
        want = sum(
            np.divide(weights[:, [c]], sums[:, [c]], out=np.zeros((n, 1)), where=sums[:, [c]] > 0)
            * dense[c]
            for c in range(3)
        )
        mixed = mix_channels(channels, rhos)
        np.testing.assert_allclose(mixed, want, rtol=1e-12, atol=1e-15)
        restart = restart_vector(rng.random(n), 5.0)
        fixed = mixed.copy()
        fixed[~mixed.any(axis=1)] = restart  # a dangling node's mass goes back to the restart
        closed = 0.34 * np.linalg.solve(np.eye(n) - 0.66 * fixed.T, restart)
        walked = random_walk_with_restart(mixed, restart, 0.34, max_iter=2000, tol=1e-15)
        np.testing.assert_allclose(walked, closed, atol=1e-9)


def test_restart_vector_sharpens_seed_scores() -> None:
    p = restart_vector(np.array([0.8, 0.4]), 5.0)
    np.testing.assert_allclose(p, np.array([0.8**5, 0.4**5]) / (0.8**5 + 0.4**5))
    np.testing.assert_allclose(restart_vector(np.array([0.0, 0.0]), 5.0), [0.5, 0.5])


@pytest.mark.parametrize(
    ("ratio", "expected"),
    [(0.01, 1.0), (0.05, 1.0), (0.10, (0.05 / 0.10) ** 0.7), (0.5, 0.45), (1.0, 0.45)],
)
def test_query_keyword_penalty_with_floor(ratio: float, expected: float) -> None:
    assert frequency_penalty(ratio, True, CFG) == pytest.approx(expected)


@pytest.mark.parametrize(("ratio", "expected"), [(0.05, 1.0), (0.10, 1.0), (0.2, 0.5), (1.0, 0.1)])
def test_non_query_keyword_penalty(ratio: float, expected: float) -> None:
    assert frequency_penalty(ratio, False, CFG) == pytest.approx(expected)


def test_keyword_weight_is_idf_times_boost_times_penalty() -> None:
    assert keyword_weight(2, 100, True, CFG) == pytest.approx(math.log(50) * 2.5 * 1.0)
    assert keyword_weight(20, 100, False, CFG) == pytest.approx(math.log(5) * (0.1 / 0.2))
    assert keyword_weight(100, 100, True, CFG) == 0.0  # in every fact: no information
    assert keyword_weight(0, 100, True, CFG) == 0.0


def test_event_edges_penalise_size_and_stop_past_the_maximum() -> None:
    assert event_edge_weight(1, CFG) == 0.0
    assert event_edge_weight(2, CFG) == pytest.approx(1.0)
    assert event_edge_weight(5, CFG) == pytest.approx(1 / 4**1.25)
    assert event_edge_weight(60, CFG) == pytest.approx(1 / 59**1.25)
    assert event_edge_weight(61, CFG) == 0.0


def test_turn_edges_decay_within_the_window() -> None:
    assert turn_edge_weight(0, CFG) == pytest.approx(1.0)
    assert turn_edge_weight(1, CFG) == pytest.approx(math.exp(-0.5))
    assert turn_edge_weight(2, CFG) == pytest.approx(math.exp(-1.0))
    assert turn_edge_weight(3, CFG) == 0.0


def test_local_graph_reaches_keyword_and_turn_neighbours_but_not_strangers() -> None:
    from common.retrieval.graph import LocalGraph
    from common.store.space_index import SpaceIndex

    index = SpaceIndex(tenant="t", space="s", dimension=2)
    facts = [
        turn_fact(0, ["guitar", "lesson"], ["Ann"], 1, 1),
        turn_fact(1, ["guitar", "concert"], ["Ann"], 3, 9),  # shares a keyword with the seed
        turn_fact(2, ["weather"], ["Ann"], 1, 2),  # next turn after the seed
        turn_fact(3, ["garden"], ["Ann"], 5, 4),  # nothing in common
        turn_fact(4, ["guitar"], ["Bob"], 4, 1),  # shares a keyword, but only Bob: gated
    ]
    for f in facts:
        index.put_fact(f, np.array([1.0, 0.0], dtype=np.float32))
    result = LocalGraph(index, ["guitar"], CFG).run([0], np.array([0.9]))
    reached = {index.facts.ids[r] for r in result.rows}
    assert reached == {"f0", "f1", "f2"}
    activation = dict(
        zip((index.facts.ids[r] for r in result.rows), result.activation, strict=True)
    )
    assert activation["f0"] > activation["f1"] > 0 and activation["f2"] > 0
    assert sum(activation.values()) == pytest.approx(1.0)


def test_rank_fusion_weighs_the_two_orders_by_share() -> None:
    activation = np.array([0.5, 0.3, 0.2])
    relevance = np.array([0.1, 0.2, 0.9])
    only_activation = fuse_ranks(activation, relevance, share=1.0, k=60)
    assert list(np.argsort(-only_activation)) == [0, 1, 2]
    only_relevance = fuse_ranks(activation, relevance, share=0.0, k=60)
    assert list(np.argsort(-only_relevance)) == [2, 1, 0]
    mixed = fuse_ranks(activation, relevance, share=0.3, k=1)
    # ranks: activation (1, 2, 3), relevance (3, 2, 1)
    expected = [0.3 / 2 + 0.7 / 4, 0.3 / 3 + 0.7 / 3, 0.3 / 4 + 0.7 / 2]
    assert mixed == pytest.approx(expected)


def test_rank_fusion_breaks_ties_by_node_order() -> None:
    fused = fuse_ranks(np.ones(3), np.ones(3), share=0.5, k=60)
    assert fused[0] > fused[1] > fused[2]


def test_local_graph_does_not_depend_on_the_order_facts_reached_the_index() -> None:
    from common.retrieval.graph import LocalGraph
    from common.store.space_index import SpaceIndex

    # Ten facts sharing one keyword with the seed, equally weighted: more than the cap of 4.
    cfg = CFG.model_copy(update={"max_neighbors_per_fact": 4, "max_local_nodes": 5})
    facts = [turn_fact(0, ["kayak"], ["Ann"], 1, 1)] + [
        turn_fact(i, ["kayak"], ["Ann"], 10 + i, 1) for i in range(1, 11)
    ]
    fillers = [turn_fact(100 + i, [f"word{i}"], ["Bob"], 100 + i, 1) for i in range(40)]
    reached = []
    for order in (facts + fillers, [facts[0], *reversed(facts[1:]), *fillers]):
        index = SpaceIndex(tenant="t", space="s", dimension=2)
        for f in order:
            index.put_fact(f, np.array([1.0, 0.0], dtype=np.float32))
        result = LocalGraph(index, ["kayak"], cfg).run([0], np.array([0.9]))
        reached.append([index.facts.ids[r] for r in result.rows])
    assert reached[0] == reached[1]
    assert len(reached[0]) == 5


def test_local_entity_edges_sum_shared_keyword_weights_gate_people_and_cap_rows() -> None:
    from common.retrieval.graph import LocalGraph
    from common.store.space_index import SpaceIndex

    index = SpaceIndex(tenant="t", space="s", dimension=2)
    facts = [
        turn_fact(0, ["kayak", "lake"], ["Ann"], 1, 1),
        turn_fact(1, ["kayak", "lake"], ["Ann"], 2, 1),  # shares both keywords
        turn_fact(2, ["kayak"], ["Ann"], 3, 1),  # shares one
        turn_fact(3, ["kayak", "lake"], ["Bob"], 4, 1),  # shares both, other person: gated
        *[turn_fact(10 + i, [f"w{i}"], ["Cy"], 10 + i, 1) for i in range(20)],
    ]
    for f in facts:
        index.put_fact(f, np.array([1.0, 0.0], dtype=np.float32))
    graph = LocalGraph(index, [], CFG)
    w = graph.local_entity_matrix([0, 1, 2, 3]).toarray()
    both = graph.weight("kayak") + graph.weight("lake")
    assert w[0, 1] == pytest.approx(both) and w[1, 0] == pytest.approx(both)
    assert w[0, 2] == pytest.approx(graph.weight("kayak"))
    assert w[0, 3] == 0.0 and w[3, 0] == 0.0 and np.all(np.diag(w) == 0.0)
    # the per-fact entity neighbours agree with the local matrix row
    assert graph.entity_neighbours(0) == {1: pytest.approx(both), 2: pytest.approx(w[0, 2])}
    capped = LocalGraph(index, [], CFG.model_copy(update={"max_neighbors_per_fact": 1}))
    row = capped.local_entity_matrix([0, 1, 2, 3]).toarray()[0]
    assert np.count_nonzero(row) == 1 and row[1] == pytest.approx(both)


def test_event_and_turn_edges_of_the_whole_space_follow_membership_positions_and_caps() -> None:
    from common.models.memory import Event
    from common.retrieval.graph import LocalGraph
    from common.store.space_index import SpaceIndex

    index = SpaceIndex(tenant="t", space="s", dimension=2)
    facts = [
        turn_fact(0, ["a"], ["Ann"], 1, 1),
        turn_fact(1, ["b"], ["Ann"], 1, 2),
        turn_fact(2, ["c"], ["Ann"], 1, 4),
        turn_fact(3, ["d"], ["Ann"], 2, 1),  # another session: no turn edge to session 1
    ]
    two_turns = turn_fact(4, ["e"], ["Ann"], 1, 3)
    two_turns.source.positions = [3, 9]
    for f in [*facts, two_turns]:
        index.put_fact(f, np.array([1.0, 0.0], dtype=np.float32))

    def event(eid: str, members: list[int]) -> Event:
        ids = [f"f{i}" for i in members]
        return Event(id=eid, tenant="t", space="s", summary=eid, fact_ids=ids,
                     participants=["Ann"], keywords=[])  # fmt: skip

    for e in (event("e1", [0, 1, 2]), event("e2", [0, 1]), event("big", [0, 1, 2, 3])):
        index.put_event(e, np.array([1.0, 0.0], dtype=np.float32))
    cfg = CFG.model_copy(update={"max_event_size": 3})
    w3, w2 = event_edge_weight(3, cfg), event_edge_weight(2, cfg)
    graph = LocalGraph(index, [], cfg)
    # events: summed over shared events, the one past the maximum size adds nothing
    assert graph.event_neighbours(0) == {1: pytest.approx(w3 + w2), 2: pytest.approx(w3)}
    assert graph.event_neighbours(3) == {}
    # turns: the closest pair of positions within the window, same session only
    assert graph.turn_neighbours(0) == {
        1: pytest.approx(turn_edge_weight(1, cfg)),
        4: pytest.approx(turn_edge_weight(2, cfg)),
    }
    assert graph.turn_neighbours(4) == {
        0: pytest.approx(turn_edge_weight(2, cfg)),
        1: pytest.approx(turn_edge_weight(1, cfg)),
        2: pytest.approx(turn_edge_weight(1, cfg)),
    }
    # caps keep the heaviest, ties going to the smaller fact id
    capped = LocalGraph(
        index,
        [],
        cfg.model_copy(
            update={"max_event_neighbors_per_fact": 1, "max_turn_neighbors_per_fact": 1}
        ),  # fmt: skip
    )
    assert list(capped.event_neighbours(0)) == [1]
    assert list(capped.event_neighbours(2)) == [0]
    assert list(capped.turn_neighbours(4)) == [1]
    # a removed fact leaves every channel the next time a query builds its graph
    index.facts.remove("f1")
    graph = LocalGraph(index, [], cfg)
    assert graph.event_neighbours(0) == {2: pytest.approx(w3)}
    assert graph.turn_neighbours(0) == {4: pytest.approx(turn_edge_weight(2, cfg))}


def test_entity_rows_read_heaviest_first_keep_the_cap_of_every_candidate() -> None:
    """A row's candidates are gated heaviest first in growing slices: the neighbours kept
    are those of gating every candidate and capping the row, ties at the boundary by id."""
    from common.retrieval.graph import LocalGraph, _cap_rows
    from common.store.space_index import SpaceIndex

    rng = np.random.default_rng(11)
    index = SpaceIndex(tenant="t", space="s", dimension=4)
    # most facts are Ann's or Bo's, so the heaviest candidates of Cy's facts are gated out;
    # keywords of very different frequencies give sums of many values, and some ties
    people = [["Ann"]] * 6 + [["Bo"]] * 6 + [["Ann", "Bo"], [], ["Cy"]]
    often = np.arange(10, 0, -1) / 55
    for n in range(600):
        k = rng.choice(10, size=int(rng.integers(1, 5)), replace=False, p=often)
        fact = turn_fact(n, [f"k{x}" for x in k], people[int(rng.integers(0, len(people)))], n, 0)
        index.put_fact(fact, np.eye(4, dtype=np.float32)[n % 4])
    cy = [r for r in range(600) if index.facts.records[r].participants == ["Cy"]]
    for cap in (1, 3, 8, 30):
        cfg = CFG.model_copy(update={"max_neighbors_per_fact": cap})
        graph = LocalGraph(index, ["k1"], cfg)
        rows = cy[:6] + [int(r) for r in rng.choice(600, size=4, replace=False)]
        i, j, w = graph._entity_edges(np.asarray(rows), among_themselves=False)
        id_rank = index.fact_arrays().id_rank
        want = _cap_rows(i, j, w, cap, id_rank, (len(rows), 600)).toarray()
        assert np.array_equal(graph.entity_rows(rows).toarray(), want)


def test_entity_rows_of_facts_without_a_query_keyword_are_kept_until_the_space_changes() -> None:
    """A fact none of whose keywords is in the query has the same entity row for every
    query: the next query reads it as kept; a row with a query keyword is computed with that
    query's weights; a change to the space starts over."""
    from common.retrieval.graph import LocalGraph
    from common.store.space_index import SpaceIndex

    rng = np.random.default_rng(3)
    index = SpaceIndex(tenant="t", space="s", dimension=2)
    for n in range(300):
        k = rng.choice(8, size=int(rng.integers(1, 4)), replace=False)
        fact = turn_fact(n, [f"k{x}" for x in k], [["Ann"], ["Bo"]][n % 2], n, 0)
        index.put_fact(fact, np.array([1.0, 0.0], dtype=np.float32))
    has = {r: set(index.facts.records[r].keywords) for r in range(300)}
    rows = [int(r) for r in rng.choice(300, size=40, replace=False)]

    def same_as_computed(graph: LocalGraph) -> list[tuple[np.ndarray, np.ndarray]]:
        got = graph.entity_of(rows)
        want = graph.entity_rows(rows)
        for pos, (columns, weights) in enumerate(got):
            lo, hi = want.indptr[pos], want.indptr[pos + 1]
            assert np.array_equal(columns, want.indices[lo:hi])
            assert np.array_equal(weights, want.data[lo:hi])
        return got

    first = same_as_computed(LocalGraph(index, ["k1"], CFG))
    second = same_as_computed(LocalGraph(index, ["k2"], CFG))
    for pos, row in enumerate(rows):
        plain_in_both = not has[row] & {"k1", "k2"}
        assert (second[pos][0] is first[pos][0]) == plain_in_both
    # a saved index carries none of them (query threads fill them while a commit saves)
    import pickle

    from common.retrieval.graph import channels

    kept = channels(index, CFG)
    assert kept.plain_entity_rows
    assert pickle.loads(pickle.dumps(kept)).plain_entity_rows == {}
    index.put_fact(turn_fact(300, ["k1", "k2"], ["Ann"], 300, 0), np.array([0.0, 1.0], np.float32))
    third = same_as_computed(LocalGraph(index, ["k2"], CFG))
    assert not any(t[0] is s[0] for t, s in zip(third, second, strict=True))


def test_local_submatrix_equals_scipy_indexing_entry_for_entry() -> None:
    from common.retrieval.graph import _submatrix

    rng = np.random.default_rng(5)
    for _ in range(20):
        n = 50
        dense = rng.random((n, n)) * (rng.random((n, n)) < 0.15)
        matrix = sp.csr_matrix(dense)
        local = rng.permutation(n)[: rng.integers(1, n)]
        ours = _submatrix(matrix, local)
        theirs = matrix[local][:, local].tocsr()
        # same entries in the same stored order, so sums over rows add in the same order
        assert np.array_equal(ours.indptr, theirs.indptr)
        assert np.array_equal(ours.indices, theirs.indices)
        assert np.array_equal(ours.data, theirs.data)


def test_taken_rows_equal_scipy_indexing_entry_for_entry() -> None:
    from common.retrieval.graph import _take_rows

    rng = np.random.default_rng(6)
    for _ in range(20):
        dense = rng.random((60, 40)) * (rng.random((60, 40)) < 0.1)
        dense[rng.integers(0, 60, 5)] = 0.0  # rows with no entries
        matrix = sp.csr_matrix(dense)
        rows = rng.integers(0, 60, rng.integers(1, 30))  # any order, repeats included
        ours, theirs = _take_rows(matrix, rows), matrix[rows]
        assert ours.shape == theirs.shape
        assert np.array_equal(ours.indptr, theirs.indptr)
        assert np.array_equal(ours.indices, theirs.indices)
        assert np.array_equal(ours.data, theirs.data)


def test_the_local_cap_keeps_the_entries_of_the_three_key_sort_ties_included() -> None:
    from common.retrieval.graph import _cap_local, _cap_rows

    rng = np.random.default_rng(11)
    for _ in range(40):
        n = int(rng.integers(2, 60))
        cap = int(rng.integers(1, 12))
        # few distinct weights, so rows hold many ties at their boundary
        dense = rng.integers(1, 4, (n, n)) * (rng.random((n, n)) < 0.4) / 4.0
        np.fill_diagonal(dense, 0.0)
        i, j = np.nonzero(dense)  # sorted by row, as the local entity edges come
        id_rank = rng.permutation(n)
        ours = _cap_local(i, j, dense[i, j], cap, id_rank, n)
        theirs = _cap_rows(i, j, dense[i, j], cap, id_rank, (n, n))
        assert np.array_equal(ours.toarray(), theirs.toarray())
        assert np.all(np.diff(ours.indptr) <= cap)


def test_turn_edges_hold_for_every_accepted_session_order() -> None:
    """Orders past 2**31 (a seq, or a start after 2038), before 1970, and up to 2**53 keep
    each session's turns linked and sessions apart; far-apart positions stay unlinked."""
    from common.retrieval.graph import LocalGraph
    from common.store.space_index import SpaceIndex

    orders = [-2_208_988_800, 0, 1, 2**31 - 1, 2**31, 32_503_679_999, 2**53 - 1, 2**53]
    index = SpaceIndex(tenant="t", space="s", dimension=2)
    for k, seq in enumerate(orders):
        for pos in (0, 1, 1_000_000):
            f = turn_fact(3 * k + min(pos, 2), [f"w{k}{pos}"], ["Ann"], seq, pos)
            index.put_fact(f, np.array([1.0, 0.0], dtype=np.float32))
    graph = LocalGraph(index, [], CFG)
    near = turn_edge_weight(1, CFG)
    for k in range(len(orders)):
        rows = [index.facts.rows[f"f{3 * k + i}"] for i in range(3)]
        assert graph.turn_neighbours(rows[0]) == {rows[1]: pytest.approx(near)}
        assert graph.turn_neighbours(rows[2]) == {}
    result = graph.run([0], np.array([0.9]))
    assert len(result.rows) >= 2


def test_the_explained_graph_shows_seeds_hits_and_their_edges_by_channel() -> None:
    from common.retrieval.explain import recall_graph
    from common.retrieval.graph import LocalGraph
    from common.store.space_index import SpaceIndex

    index = SpaceIndex(tenant="t", space="s", dimension=2)
    for f in [
        turn_fact(0, ["guitar", "lesson"], ["Ann"], 1, 1),
        turn_fact(1, ["guitar", "concert"], ["Ann"], 3, 9),
        turn_fact(2, ["weather"], ["Ann"], 1, 2),
    ]:
        index.put_fact(f, np.array([1.0, 0.0], dtype=np.float32))
    result = LocalGraph(index, ["guitar"], CFG).run([0], np.array([0.9]))
    graph = recall_graph(index, result, seeds=1, hit_ids=["f2", "f0"], max_nodes=2)
    # the seed and both hits are shown although max_nodes is 2; f1 is neither
    nodes = {n.fact_id: n for n in graph.nodes}
    assert set(nodes) == {"f0", "f2"} and graph.local_nodes == 3
    assert (nodes["f0"].role, nodes["f0"].rank) == ("seed", 1)
    assert (nodes["f2"].role, nodes["f2"].rank, nodes["f2"].text) == ("expanded", 0, "fact 2")
    assert [(e.source, e.target, e.channel) for e in graph.edges] == [("f0", "f2", "turn")]
    assert graph.edges[0].weight == pytest.approx(math.exp(-1 / CFG.tau_turn))
    wide = recall_graph(index, result, seeds=1, hit_ids=["f0"])
    assert {n.fact_id for n in wide.nodes} == {"f0", "f1", "f2"}
    assert {(e.source, e.target, e.channel) for e in wide.edges} == {
        ("f0", "f2", "turn"),
        ("f0", "f1", "keyword"),
    }


def _same(a: sp.csr_matrix, b: sp.csr_matrix) -> bool:
    """Entry for entry, in stored order."""
    return (
        a.shape == b.shape
        and np.array_equal(a.indptr, b.indptr)
        and np.array_equal(a.indices, b.indices)
        and np.array_equal(a.data, b.data)
    )


@pytest.mark.parametrize("kept", [None, 6])
def test_channels_brought_up_to_date_after_writes_equal_channels_built_from_scratch(
    kept: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Facts and events added, rewritten and removed at random, in batches: after each, the
    channels updated from the last state's are the ones a build from scratch gives (and
    those built again where the index no longer records every change since)."""
    from common.models.memory import Event
    from common.retrieval.graph import Channels, channels
    from common.store import space_index
    from common.store.space_index import FactArrays, SpaceIndex

    if kept is not None:
        monkeypatch.setattr(space_index, "_CHANGES_KEPT", kept)
    rng = np.random.default_rng(11)
    cfg = CFG.model_copy(
        update={
            "max_event_size": 6,
            "max_event_neighbors_per_fact": 3,
            "max_turn_neighbors_per_fact": 2,
        }
    )
    index = SpaceIndex(tenant="t", space="s", dimension=2)
    vector = np.array([1.0, 0.0], dtype=np.float32)
    people, words = ["Ann", "Bo", "Cy", "Di"], ["a", "b", "c", "d", "e", "f"]
    made = 0
    for step in range(40):
        for _ in range(int(rng.integers(1, 6))):
            op = rng.random()
            if op < 0.45 or made < 4:  # a new fact, or a fact rewritten in place
                i = made if rng.random() < 0.8 or made == 0 else int(rng.integers(made))
                made += i == made
                fact = turn_fact(
                    i,
                    list(rng.choice(words, size=2, replace=False)),
                    list(rng.choice(people, size=int(rng.integers(1, 3)), replace=False)),
                    int(rng.integers(1, 4)),
                    int(rng.integers(0, 6)),
                )
                if rng.random() < 0.2:
                    fact.source.positions = [*fact.source.positions, int(rng.integers(0, 6))]
                index.put_fact(fact, vector)
            elif op < 0.75:  # an event made or rewritten, some members not (yet) facts
                size = int(rng.integers(2, 8))
                members = [f"f{int(m)}" for m in rng.choice(made + 3, size=size, replace=False)]
                eid = f"e{int(rng.integers(8))}"
                event = Event(id=eid, tenant="t", space="s", summary="e", fact_ids=members,
                              participants=[], keywords=[])  # fmt: skip
                index.put_event(event, vector)
            elif op < 0.9:
                index.remove_fact(f"f{int(rng.integers(made))}")
            else:
                index.remove_event(f"e{int(rng.integers(8))}")
        current = channels(index, cfg)
        fresh = Channels(index, cfg)
        for name in ("event", "turn", "incidence", "incidence_t"):
            assert _same(getattr(current, name), getattr(fresh, name)), (step, name)
        assert np.array_equal(current.base_weight, fresh.base_weight)
        if step % 10 == 9:  # a saved index goes on from the channels saved with it
            index = pickle.loads(pickle.dumps(index))
        # the incidence as one sparse matrix of every (fact, keyword) of the postings
        columns = sorted(index.facts.kw_postings)
        pairs = [(r, j) for j, kw in enumerate(columns) for r in index.facts.kw_postings[kw]]
        plain = sp.csr_matrix(
            (np.ones(len(pairs)), ([r for r, _ in pairs], [j for _, j in pairs])),
            shape=(len(index.facts.ids), len(columns)),
        )
        assert _same(current.incidence, plain) and _same(current.incidence_t, plain.T.tocsr())
        assert list(current.keywords) == columns
        arrays, plain_arrays = index.fact_arrays(), FactArrays(index.facts)
        for name in ("people", "has_people", "id_rank"):
            assert np.array_equal(getattr(arrays, name), getattr(plain_arrays, name)), name
