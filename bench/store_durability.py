"""What durability and erasure cost on the embedded store (Qdrant Edge), in one run.

    python -m bench.store_durability --out bench/results/store_durability.json

A write of a commit stage's size (`--batch` points, 384-d vectors, ~400-byte payloads) timed
as the store makes it (flushed before it returns) against, as the floor, the same engine
update with no flush; then the scrub that follows every erasure (`EdgeStore.compact`: the
shard rewritten into a fresh directory) on stores of each of `--sizes` points, after deleting
the points that said a marker. The last figure per size is the files under the store that
still hold the marker (0).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import qdrant_edge as qe

from common.store.base import Kind, Point
from common.store.edge import EdgeStore, point_key

DIM = 384
MARKER = "Quillfeather"


def _fact(rng: np.random.Generator, i: int, said: str = "") -> Point:
    payload = {
        "tenant": "t",
        "space": "s",
        "text": f"fact {i} {said} " + "word " * 60,
        "participants": ["Ann"],
        "keywords": ["k"],
        "source": {"session_id": f"s{i // 20}"},
        "time": {"session": "2024-03-01T00:00:00Z"},
    }
    return Point(f"f{i}", payload, rng.random(DIM, dtype=np.float32))


def _bare(point: Point) -> qe.Point:
    vector: dict[str, Any] = {"dense": point.vector}
    return qe.Point(point_key(Kind.FACTS, point.id), vector, {"_doc": json.dumps(point.payload)})


def writes(root: Path, rng: np.random.Generator, batch: int, rounds: int) -> dict[str, Any]:
    """Median ms of a store write (flushed, as shipped) and of the bare engine update."""
    store = EdgeStore(root / "writes", DIM)
    shard = store._shard  # the floor goes straight to the engine
    flushed, bare = [], []
    for r in range(rounds):
        points = [_fact(rng, r * batch + j) for j in range(batch)]
        start = time.perf_counter()
        store.write([(Kind.FACTS, p) for p in points])
        flushed.append(time.perf_counter() - start)
        others = [_bare(_fact(rng, 10**6 + r * batch + j)) for j in range(batch)]
        start = time.perf_counter()
        shard.update(qe.UpdateOperation.upsert_points(others))
        bare.append(time.perf_counter() - start)
    store.close()
    f, b = statistics.median(flushed) * 1000, statistics.median(bare) * 1000
    return {
        "batch": batch,
        "flushed_ms": round(f, 1),
        "unflushed_ms": round(b, 1),
        "flushed_over_unflushed": round(f / b, 2),
    }


def scrub(root: Path, rng: np.random.Generator, size: int) -> dict[str, Any]:
    """Seconds of the scrub after erasing the 20 points that said the marker, and the files
    that hold the marker after it."""
    path = root / f"scrub-{size}"
    store = EdgeStore(path, DIM)
    for start in range(0, size, 500):
        block = range(start, min(size, start + 500))
        store.write([(Kind.FACTS, _fact(rng, i, MARKER if i < 20 else "")) for i in block])
    store.delete(Kind.FACTS, "t", "s", [f"f{i}" for i in range(20)])
    began = time.perf_counter()
    store.compact()
    seconds = time.perf_counter() - began
    store.close()
    needle = MARKER.encode()
    holding = [f for f in path.rglob("*") if f.is_file() and needle in f.read_bytes()]
    return {"points": size, "scrub_s": round(seconds, 2), "files_holding_marker": len(holding)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=40, help="points per write")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory(prefix="atommem-durability-") as tmp:
        root = Path(tmp)
        out = {
            "write": writes(root, rng, args.batch, args.rounds),
            "scrub": [scrub(root, rng, size) for size in args.sizes],
        }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
