"""`python -m bench.edge_search`: where primary recall should rank a large space, the space
index's matrix scan or Qdrant Edge's own filtered search.

For each size, one space of N synthetic facts (384-d unit vectors, keywords, two speakers)
is put both in an Edge shard (the embedded store's layout: tenant, space and kind indexed)
and in a space index (`common/store/space_index.py`). Timed per question, p50 over the
questions: the index's S_h ranking over the whole space (cosine and BM25 over the keywords,
what recall does), and Edge's filtered top-k by cosine alone (no keyword term, so it does less).
With `--hnsw`, the shard is also optimised (Edge builds its HNSW graph then) and searched
again, and the build is timed. Results go to `bench/results/edge_search.json`.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import qdrant_edge as qe

from bench.metrics import percentiles
from common.settings import SimilaritySettings
from common.similarity import TextQuery
from common.store.space_index import KindIndex

DIM = 384
WORDS = [f"word{i}" for i in range(3000)]


class _Row:
    def __init__(self, people: list[str]) -> None:
        self.participants = people


def _vectors(rng: np.random.Generator, n: int) -> np.ndarray:
    matrix = rng.standard_normal((n, DIM)).astype(np.float32)
    unit: np.ndarray = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
    return unit


def _build(root: Path, n: int, rng: np.random.Generator) -> tuple[qe.EdgeShard, KindIndex[Any]]:
    shard = qe.EdgeShard.create(
        str(root),
        qe.EdgeConfig(
            vectors={"dense": qe.EdgeVectorParams(size=DIM, distance=qe.Distance.Cosine)}
        ),
    )
    for name in ("tenant", "space", "_kind"):
        shard.update(qe.UpdateOperation.create_field_index(name, qe.PayloadSchemaType.Keyword))
    index: KindIndex[Any] = KindIndex(DIM, lambda row: row.participants)
    vectors = _vectors(rng, n)
    for start in range(0, n, 512):
        points = []
        for i in range(start, min(n, start + 512)):
            keywords = [WORDS[int(j)] for j in rng.integers(0, len(WORDS), 3)]
            people = ["Ava"] if i % 2 else ["Noah"]
            payload = {"tenant": "t", "space": "s", "_kind": "facts", "keywords": keywords}
            points.append(qe.Point(str(uuid.uuid4()), {"dense": vectors[i]}, payload))
            index.upsert(f"f{i}", _Row(people), vectors[i], keywords, " ".join(keywords))
        shard.update(qe.UpdateOperation.upsert_points(points))
    shard.flush()
    return shard, index


def _time_engine(shard: qe.EdgeShard, queries: np.ndarray, k: int) -> dict[str, float]:
    flt = qe.Filter(
        must=[
            qe.FieldCondition(key="_kind", match=qe.MatchValue("facts")),
            qe.FieldCondition(key="tenant", match=qe.MatchValue("t")),
            qe.FieldCondition(key="space", match=qe.MatchValue("s")),
        ]
    )
    times = []
    for vector in queries:
        began = time.perf_counter()
        shard.query(
            qe.QueryRequest(
                limit=k, query=qe.Query.Nearest(vector, using="dense"), filter=flt,
                with_payload=False,
            )
        )  # fmt: skip
        times.append((time.perf_counter() - began) * 1000)
    return percentiles(times)


def _time_index(index: KindIndex[Any], queries: np.ndarray, k: int) -> dict[str, float]:
    weights = SimilaritySettings()
    rng = np.random.default_rng(7)
    times = []
    for vector in queries:
        keywords = [WORDS[int(j)] for j in rng.integers(0, len(WORDS), 3)]
        began = time.perf_counter()
        index.hybrid(vector, TextQuery.of("", keywords), weights, index.mask(), k=k)
        times.append((time.perf_counter() - began) * 1000)
    return percentiles(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--k", type=int, default=30)
    parser.add_argument("--hnsw", action="store_true", help="also build and search Edge's HNSW")
    parser.add_argument("--out", type=Path, default=Path("bench/results/edge_search.json"))
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    rows = []
    for size in args.sizes:
        root = Path(tempfile.mkdtemp(prefix="edge-search-"))
        try:
            shard, index = _build(root / "shard", size, rng)
            queries = _vectors(rng, args.queries)
            row: dict[str, Any] = {
                "size": size,
                "space_index_sh_ms": _time_index(index, queries, args.k),
                "edge_filtered_cosine_ms": _time_engine(shard, queries, args.k),
            }
            if args.hnsw:
                began = time.perf_counter()
                shard.optimize()
                row["edge_hnsw_build_s"] = round(time.perf_counter() - began, 1)
                row["edge_hnsw_filtered_cosine_ms"] = _time_engine(shard, queries, args.k)
            shard.close()
            rows.append(row)
            print(json.dumps(row), flush=True)
        finally:
            shutil.rmtree(root, ignore_errors=True)
    result = {"k": args.k, "queries": args.queries, "dimension": DIM, "sizes": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
