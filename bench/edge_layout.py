"""`python -m bench.edge_layout`: one Qdrant Edge shard holding every kind (a `_kind` field)
against one shard per kind, on the operations the embedded store does.

Both layouts hold the same synthetic memory: spaces of facts, events, profiles and session
records with 384-d unit vectors. Timed: a commit stage's write (facts, events and the session
record of one session), reading one space's facts with vectors (what building an index does),
counting a space's points of each kind, retrieving records by id, and closing and reopening
the store. Results go to `bench/results/edge_layout.json`.
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

KINDS = ("facts", "events", "profiles", "sessions")
DIM = 384


def _config() -> qe.EdgeConfig:
    return qe.EdgeConfig(
        vectors={"dense": qe.EdgeVectorParams(size=DIM, distance=qe.Distance.Cosine)}
    )


def _indexes(shard: qe.EdgeShard, with_kind: bool) -> None:
    fields = ["tenant", "space", *(["_kind"] if with_kind else [])]
    for name in fields:
        shard.update(qe.UpdateOperation.create_field_index(name, qe.PayloadSchemaType.Keyword))


class OneShard:
    name = "one shard, a kind field"

    def __init__(self, root: Path) -> None:
        self.root = root
        self.shard = qe.EdgeShard.create(str(root / "all"), _config())
        _indexes(self.shard, True)

    def write(self, items: list[tuple[str, qe.Point]]) -> None:
        self.shard.update(qe.UpdateOperation.upsert_points([p for _, p in items]))

    def _filter(self, kind: str, space: str) -> qe.Filter:
        return qe.Filter(
            must=[
                qe.FieldCondition(key="_kind", match=qe.MatchValue(kind)),
                qe.FieldCondition(key="space", match=qe.MatchValue(space)),
            ]
        )

    def scroll(self, kind: str, space: str) -> int:
        return _scroll(self.shard, self._filter(kind, space))

    def count(self, kind: str, space: str) -> int:
        return int(self.shard.count(qe.CountRequest(exact=True, filter=self._filter(kind, space))))

    def retrieve(self, kind: str, keys: list[Any]) -> int:
        return len(self.shard.retrieve(keys, with_payload=True, with_vector=False))

    def reopen(self) -> None:
        self.shard.flush()
        self.shard.close()
        self.shard = qe.EdgeShard.load(str(self.root / "all"))

    def close(self) -> None:
        self.shard.close()


class PerKind:
    name = "one shard per kind"

    def __init__(self, root: Path) -> None:
        self.root = root
        self.shards = {}
        for kind in KINDS:
            self.shards[kind] = qe.EdgeShard.create(str(root / kind), _config())
            _indexes(self.shards[kind], False)

    def write(self, items: list[tuple[str, qe.Point]]) -> None:
        groups: dict[str, list[qe.Point]] = {}
        for kind, point in items:
            groups.setdefault(kind, []).append(point)
        for kind, points in groups.items():
            self.shards[kind].update(qe.UpdateOperation.upsert_points(points))

    @staticmethod
    def _filter(space: str) -> qe.Filter:
        return qe.Filter(must=[qe.FieldCondition(key="space", match=qe.MatchValue(space))])

    def scroll(self, kind: str, space: str) -> int:
        return _scroll(self.shards[kind], self._filter(space))

    def count(self, kind: str, space: str) -> int:
        request = qe.CountRequest(exact=True, filter=self._filter(space))
        return int(self.shards[kind].count(request))

    def retrieve(self, kind: str, keys: list[Any]) -> int:
        return len(self.shards[kind].retrieve(keys, with_payload=True, with_vector=False))

    def reopen(self) -> None:
        for kind, shard in self.shards.items():
            shard.flush()
            shard.close()
            self.shards[kind] = qe.EdgeShard.load(str(self.root / kind))

    def close(self) -> None:
        for shard in self.shards.values():
            shard.close()


def _scroll(shard: qe.EdgeShard, flt: qe.Filter) -> int:
    offset: Any = None
    seen = 0
    while True:
        records, offset = shard.scroll(
            qe.ScrollRequest(
                offset=offset, limit=1024, filter=flt, with_payload=True, with_vector=["dense"]
            )
        )
        for record in records:
            _ = record.payload, record.vector  # what building an index reads
        seen += len(records)
        if offset is None:
            return seen


def _point(rng: np.random.Generator, kind: str, space: str, i: int) -> qe.Point:
    payload = {"tenant": "t", "space": space, "_kind": kind, "text": f"{kind} {i} of {space}"}
    if kind == "sessions":
        return qe.Point(str(uuid.uuid4()), {}, {**payload, "turns": ["a turn"] * 20})
    vector = rng.standard_normal(DIM).astype(np.float32)
    unit: list[float] = (vector / np.linalg.norm(vector)).tolist()
    return qe.Point(str(uuid.uuid4()), {"dense": unit}, payload)


def _session(rng: np.random.Generator, space: str, n: int) -> list[tuple[str, qe.Point]]:
    """One commit stage's points: 30 facts, 5 events, 1 profile, the session record."""
    shape = (("facts", 30), ("events", 5), ("profiles", 1), ("sessions", 1))
    return [(k, _point(rng, k, space, n * 100 + i)) for k, count in shape for i in range(count)]


def measure(layout: Any, spaces: int, sessions: int, rng: np.random.Generator) -> dict[str, Any]:
    write_ms: list[float] = []
    keys: list[Any] = []
    for n in range(sessions):
        for s in range(spaces):
            items = _session(rng, f"space-{s}", n)
            began = time.perf_counter()
            layout.write(items)
            write_ms.append((time.perf_counter() - began) * 1000)
            keys.append(items[0][1].id)
    out: dict[str, Any] = {"stage_write_ms": percentiles(write_ms)}
    began = time.perf_counter()
    layout.reopen()
    out["reopen_s"] = round(time.perf_counter() - began, 3)
    timed: dict[str, list[float]] = {"scroll_space_facts_ms": [], "count_4_kinds_ms": []}
    for s in range(spaces):
        space = f"space-{s}"
        began = time.perf_counter()
        layout.scroll("facts", space)
        timed["scroll_space_facts_ms"].append((time.perf_counter() - began) * 1000)
        began = time.perf_counter()
        for kind in KINDS:
            layout.count(kind, space)
        timed["count_4_kinds_ms"].append((time.perf_counter() - began) * 1000)
    began = time.perf_counter()
    layout.retrieve("facts", keys[:200])
    out["retrieve_200_ms"] = round((time.perf_counter() - began) * 1000, 2)
    out.update({name: percentiles(values) for name, values in timed.items()})
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spaces", type=int, default=20)
    parser.add_argument("--sessions", type=int, default=30, help="sessions per space")
    parser.add_argument("--out", type=Path, default=Path("bench/results/edge_layout.json"))
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="edge-layout-"))
    results: dict[str, Any] = {
        "spaces": args.spaces,
        "sessions_per_space": args.sessions,
        "facts": args.spaces * args.sessions * 30,
        "layouts": {},
    }
    try:
        for layout_class in (OneShard, PerKind):
            folder = root / layout_class.__name__
            folder.mkdir()
            layout = layout_class(folder)
            rng = np.random.default_rng(0)
            results["layouts"][layout.name] = measure(layout, args.spaces, args.sessions, rng)
            layout.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
