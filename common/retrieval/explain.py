"""The recall graph as a person can read it: which facts seeded the walk, which it reached,
and the edges between them by channel, for a search asked with `explain`."""

from __future__ import annotations

import numpy as np

from common.models.query import Channel, GraphEdge, GraphNode, RecallGraph
from common.retrieval.graph import GraphResult
from common.store.space_index import SpaceIndex

CHANNELS: tuple[Channel, ...] = ("keyword", "event", "turn")  # GraphResult.channels' order
MAX_NODES = 40
MAX_EDGES = 200


def recall_graph(
    index: SpaceIndex,
    result: GraphResult,
    seeds: int,
    hit_ids: list[str],
    max_nodes: int = MAX_NODES,
    max_edges: int = MAX_EDGES,
) -> RecallGraph:
    """Every seed and every hit, then the most activated expanded facts up to `max_nodes`;
    the strongest edges among them (one per pair and channel) up to `max_edges`."""
    rows = result.rows
    # the local nodes' facts, less any erased since the walk read them
    found = {i: fact for i, r in enumerate(rows) if (fact := index.facts.live(r)) is not None}
    ids = {i: fact.id for i, fact in found.items()}
    rank = {fact_id: i for i, fact_id in enumerate(hit_ids)}
    shown = [i for i in found if i < seeds or ids[i] in rank]
    taken = set(shown)
    for i in np.argsort(-result.activation, kind="stable").tolist():
        if len(shown) >= max_nodes:
            break
        if i not in taken and i in found:
            shown.append(i)
            taken.add(i)
    best: dict[tuple[int, int, Channel], float] = {}
    pairs = 0  # edges of the whole local graph, counted as they are drawn: a pair per channel
    for channel, matrix in zip(CHANNELS, result.channels, strict=False):
        coo = matrix.tocoo()
        linked: set[tuple[int, int]] = set()
        for i, j, w in zip(coo.row.tolist(), coo.col.tolist(), coo.data.tolist(), strict=True):
            if i == j or w <= 0:
                continue
            linked.add((min(i, j), max(i, j)))
            if i in taken and j in taken:
                pair = (min(i, j), max(i, j), channel)
                best[pair] = max(best.get(pair, 0.0), float(w))
        pairs += len(linked)
    strongest = sorted(best.items(), key=lambda kv: (-kv[1], kv[0]))[:max_edges]
    nodes = [
        GraphNode(
            fact_id=ids[i],
            text=found[i].text,
            role="seed" if i < seeds else "expanded",
            activation=float(result.activation[i]),
            rank=rank.get(ids[i]),
        )
        for i in shown
    ]
    edges = [
        GraphEdge(source=ids[i], target=ids[j], channel=channel, weight=w)
        for (i, j, channel), w in strongest
    ]
    return RecallGraph(nodes=nodes, edges=edges, local_nodes=len(rows), edges_total=pairs)
