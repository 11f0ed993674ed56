"""`python -m bench.cold_open`: how long a fresh process takes to open a large embedded space
and answer its first question, and how query latency grows with the space.

Building a 100k-fact space through the pipeline takes most of an hour on 2 cores, so this
harness fills each space directly: the facts of `bench.scale`'s synthetic sessions, their
participants, keywords and times from the `rules` backend, written as fact records with unit
vectors drawn at random (what opening costs does not depend on the vectors' values). There
are no events or profiles. The filling process then closes its store as a worker does, which
saves the space's index (`common/store/snapshots.py`). A fresh process then times, apart:
its start-up and imports, loading the embedding model, opening the store, the space's index
ready, and the first `full` search; then `--queries` more searches (p50 in the task).
Results go to `bench/results/cold_open.json`.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.metrics import percentiles
from bench.scale import synthetic_questions, synthetic_sessions
from common.llm.contracts import MetadataGroup
from common.llm.rules import RulesBackend
from common.models import ids
from common.models.memory import Fact, FactSource, FactTime
from common.settings import PipelineSettings, Settings, StoreSettings
from common.store import records
from common.store.base import Kind, Point

TENANT = "default"


def _settings(data: Path) -> Settings:
    return Settings(
        store=StoreSettings(qdrant_path=data / "qdrant"),
        pipeline=PipelineSettings(coordination_path=data / "coordination.sqlite"),
    )


def fill(data: Path, size: int, seed: int) -> dict[str, Any]:
    """Write a space of `size` synthetic facts straight into the store, then close it."""
    from workers import runtime

    settings = _settings(data)
    runtime.configure(settings)
    ctx = runtime.context()
    space = f"open-{size}"
    records.create_space(ctx.store, TENANT, space)
    backend = RulesBackend(settings.rules, settings.memory)
    rng = np.random.default_rng(seed)
    began = time.perf_counter()
    written = 0
    for session in synthetic_sessions(size, seed):
        points = []
        groups = [
            MetadataGroup(
                texts=list(turn.facts or []),
                speaker=turn.speaker,
                participants=session.participants,
                said_at=session.started_at,
            )
            for turn in session.turns
        ]
        for turn, metas in zip(session.turns, backend.fact_metadata_batch(groups), strict=True):
            for i, (text, meta) in enumerate(zip(turn.facts or [], metas, strict=True)):
                fact_id = ids.fact_id(TENANT, space, session.session_id, turn.id or "", i)
                fact = Fact(
                    id=fact_id,
                    tenant=TENANT,
                    space=space,
                    text=text,
                    participants=meta.participants,
                    keywords=meta.keywords,
                    time=FactTime(event=meta.event_time, session=session.started_at),
                    source=FactSource(
                        session_id=session.session_id,
                        session_seq=session.seq or 0,
                        turn_ids=[turn.id or ""],
                        positions=[turn.position or 0],
                    ),
                )
                vector = rng.standard_normal(384).astype(np.float32)
                vector /= np.linalg.norm(vector)
                points.append(
                    Point(id=fact.id, payload=fact.model_dump(mode="json"), vector=vector)
                )
        ctx.store.upsert(Kind.FACTS, points)
        written += len(points)
    fill_s = time.perf_counter() - began
    ctx.indexes.drop(TENANT, space)
    began = time.perf_counter()
    ctx.index(TENANT, space)  # read from the store once, as the first worker to open it does
    read_s = time.perf_counter() - began
    began = time.perf_counter()
    runtime.reset()  # closes the store as a stopping worker does
    close_s = time.perf_counter() - began
    return {
        "size": size,
        "facts": written,
        "fill_s": round(fill_s, 1),
        "read_from_store_s": round(read_s, 2),
        "close_s": round(close_s, 2),
    }


def open_and_ask(data: Path, size: int, queries: int, seed: int) -> dict[str, Any]:
    """In this (fresh) process: open the space and answer questions, each phase timed."""
    started = time.perf_counter()
    from common.retrieval.search import search
    from workers import runtime
    from workers.wiring import get_embedder

    imported = time.perf_counter()
    settings = _settings(data)
    runtime.configure(settings)
    ctx = runtime.context()
    get_embedder(settings.embedding).encode(["warm up"])
    model = time.perf_counter()
    space = f"open-{size}"
    ctx.store.count(Kind.FACTS, TENANT, space)
    opened = time.perf_counter()
    index = ctx.index(TENANT, space)
    ready = time.perf_counter()
    questions = synthetic_questions(queries + 1, seed)
    first = search(ctx, TENANT, space, questions[0], mode="full")
    answered = time.perf_counter()
    stages: dict[str, list[float]] = {"total": [], "lexical": [], "primary": []}
    for question in questions[1:]:
        timings = search(ctx, TENANT, space, question, mode="full").timings_ms
        for name, values in stages.items():
            values.append(timings[name])
    runtime.reset()
    return {
        "imports_s": round(imported - started, 3),
        "model_load_s": round(model - imported, 3),
        "store_open_s": round(opened - model, 3),
        "index_ready_s": round(ready - opened, 3),
        "first_query_s": round(answered - ready, 3),
        "cold_open_s": round(answered - model, 3),
        "index_facts": len(index.facts),
        "first_query_hits": len(first.hits),
        "query_total_ms": percentiles(stages["total"]),
        # the lexical channel (BM25 over the space) beside the dense primary ranking
        "query_lexical_ms": percentiles(stages["lexical"]),
        "query_primary_ms": percentiles(stages["primary"]),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=Path("bench/results/cold_open.json"))
    parser.add_argument("--child", nargs=2, metavar=("DATA", "SIZE"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        result = open_and_ask(Path(args.child[0]), int(args.child[1]), args.queries, args.seed)
        print(json.dumps(result))
        return 0
    rows = []
    for size in args.sizes:
        data = (args.data_dir or Path(tempfile.mkdtemp(prefix="cold-open-"))) / f"size-{size}"
        row = fill(data, size, args.seed)
        began = time.perf_counter()
        child = subprocess.run(
            [sys.executable, "-m", "bench.cold_open", "--child", str(data), str(size),
             "--queries", str(args.queries), "--seed", str(args.seed)],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        row["process_s"] = round(time.perf_counter() - began, 2)
        row.update(json.loads(child.stdout.strip().splitlines()[-1]))
        rows.append(row)
        print(json.dumps(row), flush=True)
    result = {
        "sizes": rows,
        "query_p50_growth": _growth(rows, "query_total_ms"),
        # the lexical channel should grow with the space as the dense scan does
        "lexical_p50_growth": _growth(rows, "query_lexical_ms"),
        "primary_p50_growth": _growth(rows, "query_primary_ms"),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


def _growth(rows: list[dict[str, Any]], key: str) -> dict[str, float]:
    """p50 of `key` at each size over the smallest size's."""
    base = rows[0][key]["p50"] or 1e-9
    return {f"{r['size']}_vs_{rows[0]['size']}": round(r[key]["p50"] / base, 2) for r in rows[1:]}


if __name__ == "__main__":
    raise SystemExit(main())
