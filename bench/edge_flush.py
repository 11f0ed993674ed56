"""`python -m bench.edge_flush`: what a commit-sized write costs the embedded store, flush
included, with the payload indexes it keeps (tenant, space, kind) against the nine an
earlier release kept (also participants, keywords, the fact's and the record's session id,
person and session time).

Each variant is a fresh `EdgeStore` (the project's own, as the worker opens it) filled with
`--fill` facts in writes of `--batch`, then timed over `--writes` more writes of `--batch`
fact points each: 384-d unit vectors and payloads shaped as the pipeline writes them. The
earlier layout is the same store with the six other indexes added to its open shard; the
store no longer copies those fields beside the document, so they index nothing and the
difference is their files alone (the earlier release also copied the fields). The variants
alternate `--rounds` times, each on a new store. A write returns once
flushed, so its time is the update and the flush. Results go to `--out`.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import qdrant_edge as qe

from bench.metrics import percentiles
from common.store.base import Kind, Point
from common.store.edge import EdgeStore

DIM = 384
# what an earlier release indexed besides tenant, space and kind
EARLIER = {
    "participants": qe.PayloadSchemaType.Keyword,
    "keywords": qe.PayloadSchemaType.Keyword,
    "source.session_id": qe.PayloadSchemaType.Keyword,
    "person": qe.PayloadSchemaType.Keyword,
    "session.session_id": qe.PayloadSchemaType.Keyword,
    "time.session": qe.PayloadSchemaType.Datetime,
}
PEOPLE = ["Ann", "Bob", "Cleo", "Dev"]
WORDS = [f"word{i}" for i in range(400)]


def _facts(rng: np.random.Generator, first: int, count: int) -> list[tuple[Kind, Point]]:
    out = []
    for n in range(first, first + count):
        vector = rng.standard_normal(DIM).astype(np.float32)
        session = n // 30
        payload: dict[str, Any] = {
            "tenant": "bench",
            "space": "flush",
            "id": f"f{n}",
            "text": f"{PEOPLE[n % 4]} said something about {' and '.join(rng.choice(WORDS, 3))}.",
            "participants": [PEOPLE[n % 4], PEOPLE[(n + 1) % 4]],
            "keywords": list(rng.choice(WORDS, 5)),
            "source": {"session_id": f"session_{session}", "turn_ids": [f"s{session}:{n % 30}"]},
            "time": {"session": f"2024-{1 + session % 12:02d}-{1 + n % 28:02d}T10:00:00"},
        }
        out.append((Kind.FACTS, Point(f"f{n}", payload, vector / np.linalg.norm(vector))))
    return out


def _run(root: Path, layout: str, args: argparse.Namespace, seed: int) -> list[float]:
    path = root / f"{layout}-{seed}"
    store = EdgeStore(path, DIM)
    if layout == "earlier":  # on the open shard: opening one drops the indexes no filter uses
        for name, schema in EARLIER.items():
            store._shard.update(qe.UpdateOperation.create_field_index(name, schema))
    rng = np.random.default_rng(seed)
    written = 0
    try:
        while written < args.fill:
            store.write(_facts(rng, written, args.batch))
            written += args.batch
        seconds = []
        for _ in range(args.writes):
            points = _facts(rng, written, args.batch)
            started = time.perf_counter()
            store.write(points)
            seconds.append((time.perf_counter() - started) * 1000)
            written += args.batch
        indexed = sorted(store._shard.info().payload_schema)
    finally:
        store.close()
        shutil.rmtree(path, ignore_errors=True)
    print(f"{layout}: {len(indexed)} indexes, write p50 {np.median(seconds):.2f} ms")
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--fill", type=int, default=3000)
    parser.add_argument("--batch", type=int, default=40)
    parser.add_argument("--writes", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", default="bench/results/edge_flush.json")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="atommem-flush-"))
    samples: dict[str, list[float]] = {"current": [], "earlier": []}
    try:
        for r in range(args.rounds):  # alternated, so drift on a shared machine hits both
            for layout in samples:
                samples[layout] += _run(root, layout, args, seed=r)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    doc = {
        "benchmark": "edge_flush",
        "command": " ".join(
            ["python -m bench.edge_flush", *(sys.argv[1:] if argv is None else argv)]
        ),
        "fill": args.fill,
        "batch": args.batch,
        "writes_each": args.writes * args.rounds,
        "indexes": {"current": ["tenant", "space", "_kind"], "earlier_adds": list(EARLIER)},
        "write_ms": {layout: percentiles(values) for layout, values in samples.items()},
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    print(f"results: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
