"""`python -m bench.ingest_at_size`: what a large space costs each new session, through the
embedded pipeline, against the same sessions into a space that starts empty.

Building a 100k-fact space through the pipeline takes most of an hour on 2 cores, so this
harness fills one with `bench.cold_open.fill` (`bench.scale`'s synthetic facts written
straight to the store, random unit vectors, no events), closes it, and then, per round, on a
fresh copy of that directory in a fresh process: submits `--facts` facts of further
synthetic sessions (their own ids, order after every filled one and session dates 80 years
on; the days named in their texts are those of the filled sessions, so verification's time
filter still finds filled facts of the same day, about ten a fact at 100k) to the large
space and the same sessions to a space of their own, and times each ingest to its last job
done (the large space opened, and PyTorch its first pass imports loaded, before any clock).
The second is the floor of the same process: their ratio is what the large space costs a
commit. The two alternate which goes first from one round to the next. Results go to
`--out`.

To compare two versions of the code, run the same command from a checkout of each.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.cold_open import TENANT, fill
from bench.scale import synthetic_sessions
from common.context import MemoryContext
from common.models.session import SessionInput
from common.producer import Producer

# the added sessions start this many years after the first filled one (the filled sessions
# are three days apart: 100k facts span 27 years)
LATER_YEARS = 80


def later_sessions(facts: int, seed: int) -> list[SessionInput]:
    """Synthetic sessions of `facts` facts, with ids and dates of their own."""
    out = []
    for session in synthetic_sessions(facts, seed):
        started = session.started_at
        out.append(
            session.model_copy(
                update={
                    "session_id": f"later-{session.session_id}",
                    "seq": 1_000_000 + (session.seq or 0),
                    "started_at": started.replace(year=started.year + LATER_YEARS),
                }
            )
        )
    return out


@contextmanager
def embedded_pipeline(data: Path) -> Iterator[tuple[MemoryContext, Producer]]:
    """In this (fresh) process: the store of `data`, the model loaded before any clock, and
    the in-process worker `atommem` runs with no broker, with a producer to submit to it."""
    from common.settings import get_settings
    from workers import runtime
    from workers.celery_app import app
    from workers.embedded import EmbeddedWorker

    runtime.configure(get_settings().in_data_dir(data))
    ctx = runtime.context()
    ctx.embedder.encode(["warm up"])
    worker = EmbeddedWorker()
    worker.start()
    coord = runtime.coordination()
    try:
        yield ctx, Producer(app, coord.jobs, coord.sequence)
    finally:
        worker.stop()
        runtime.reset()


def open_space(ctx: MemoryContext, space: str) -> float:
    """Open the space as a running worker has it, before any clock: its index, and PyTorch,
    which opening a large space starts importing for its first pass (a second and more of
    CPU that fell inside whatever was timed first); the seconds the index took."""
    from common.store.bfloat16_rows import wait_for_torch

    began = time.perf_counter()
    ctx.index(TENANT, space)
    opened = time.perf_counter() - began
    wait_for_torch()
    return opened


def ingest_round(
    data: Path, space: str, facts: int, seed: int, large_first: bool
) -> dict[str, Any]:
    """In this (fresh) process: ingest the later sessions into `space` and into a new space,
    in the order asked; seconds and facts per second of each."""
    from bench.ingest import ingest_jobs
    from common.store import records
    from common.store.base import Kind

    tenant = TENANT
    with embedded_pipeline(data) as (ctx, client):
        opened = open_space(ctx, space)
        sessions = later_sessions(facts, seed)
        targets = [("large", space), ("empty", "empty")]
        row: dict[str, Any] = {
            "large_facts": ctx.store.count(Kind.FACTS, tenant, space),
            "open_s": round(opened, 2),
        }
        for name, target in targets if large_first else targets[::-1]:
            if records.get_space(ctx.store, tenant, target) is None:
                records.create_space(ctx.store, tenant, target)
            seconds, spent = ingest_jobs(
                client, tenant, [(target, s) for s in sessions], name, True
            )
            row[name] = {
                "seconds": round(seconds, 2),
                "facts_per_s": round(spent.facts_in / seconds, 1),
                "facts_stored": spent.facts_stored,
            }
    row["ratio"] = round(row["large"]["facts_per_s"] / row["empty"]["facts_per_s"], 3)
    row["large_first"] = large_first
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000, help="facts in the large space")
    parser.add_argument("--facts", type=int, default=1500, help="facts ingested per space")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=Path("bench/results/ingest_at_size.json"))
    parser.add_argument("--child", nargs=3, metavar=("DATA", "SPACE", "FIRST"))
    args = parser.parse_args(argv)
    if args.child:
        data, space, first = args.child
        row = ingest_round(Path(data), space, args.facts, args.seed + 1, first == "large")
        print(json.dumps(row))
        return 0
    work = args.data_dir or Path(tempfile.mkdtemp(prefix="ingest-at-size-"))
    filled = work / "filled"
    result: dict[str, Any] = {
        "benchmark": "ingest_at_size",
        "command": "python -m bench.ingest_at_size " + " ".join(argv or sys.argv[1:]),
        "fill": fill(filled, args.size, args.seed),
        "rounds": [],
    }
    space = f"open-{args.size}"
    for n in range(args.rounds):
        copy = work / "round"
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(filled, copy)
        first = "large" if n % 2 == 0 else "empty"
        child = subprocess.run(
            [sys.executable, "-m", "bench.ingest_at_size", "--child", str(copy), space, first,
             "--facts", str(args.facts), "--seed", str(args.seed)],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        row = json.loads(child.stdout.strip().splitlines()[-1])
        result["rounds"].append(row)
        print(json.dumps(row), flush=True)
    shutil.rmtree(work / "round", ignore_errors=True)
    ratios = sorted(r["ratio"] for r in result["rounds"])
    result["ratio_median"] = ratios[len(ratios) // 2]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
