"""`python -m bench.after_commit`: what a question costs right after a commit to a large space,
against the next question, in the same process.

A commit changes the space's facts, and with them the recall graph's channels (the keyword
incidence, the event and turn edges of every fact) and the graph's arrays of the facts; the
first `full` question after it finds them out of date. This harness fills a space with
`bench.cold_open.fill` (`bench.scale`'s synthetic facts written straight to the store, random
unit vectors, no events), or reuses one a run left in `--data-dir`. Then, in a fresh process
with the model loaded, the space open and one question answered (so nothing of opening is
timed): per session of `--sessions`, it ingests the session through the embedded pipeline,
times the first question after the commit, then a second one, the floor of the same moment.
Results go to `--out`.

To compare two versions of the code, run the same command from a checkout of each on the same
`--data-dir`.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.cold_open import TENANT, fill
from bench.ingest_at_size import embedded_pipeline, later_sessions, open_space
from bench.metrics import percentiles
from bench.scale import synthetic_questions

FACTS_PER_SESSION = 30  # bench.scale's sessions: ten turns of three facts


def questions_after_commits(data: Path, space: str, sessions: int, seed: int) -> dict[str, Any]:
    """In this (fresh) process: per session, ingest it, then time two `full` questions."""
    from bench.ingest import ingest_jobs
    from common.retrieval.search import search

    questions = synthetic_questions(2 * sessions + 1, seed)
    first: list[float] = []
    second: list[float] = []
    with embedded_pipeline(data) as (ctx, client):
        opened = open_space(ctx, space)
        search(ctx, TENANT, space, questions[-1], mode="full")
        for n, session in enumerate(later_sessions(sessions * FACTS_PER_SESSION, seed)):
            ingest_jobs(client, TENANT, [(space, session)], "ingest", True)
            for times, question in ((first, questions[2 * n]), (second, questions[2 * n + 1])):
                began = time.perf_counter()
                search(ctx, TENANT, space, question, mode="full")
                times.append((time.perf_counter() - began) * 1000)
    after, floor = percentiles(first), percentiles(second)
    return {
        "open_s": round(opened, 2),
        "sessions": len(first),
        "first_after_commit_ms": after,
        "next_question_ms": floor,
        "p50_ratio": round(after["p50"] / floor["p50"], 2) if floor["p50"] else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000, help="facts in the space")
    parser.add_argument("--sessions", type=int, default=20, help="sessions ingested, one by one")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--data-dir", type=Path, default=None, help="where the filled space is, or goes"
    )
    parser.add_argument("--out", type=Path, default=Path("bench/results/after_commit.json"))
    parser.add_argument("--child", nargs=2, metavar=("DATA", "SPACE"))
    args = parser.parse_args(argv)
    if args.child:
        data, space = args.child
        row = questions_after_commits(Path(data), space, args.sessions, args.seed)
        print(json.dumps(row))
        return 0
    work = args.data_dir or Path(tempfile.mkdtemp(prefix="after-commit-"))
    filled = work / "filled"
    space = f"open-{args.size}"
    result: dict[str, Any] = {
        "benchmark": "after_commit",
        "command": "python -m bench.after_commit " + " ".join(argv or sys.argv[1:]),
        "size": args.size,
    }
    if (filled / "coordination.sqlite").exists():
        result["fill"] = "reused"
    else:
        result["fill"] = fill(filled, args.size, args.seed)
    copy = work / "round"  # the filled space stays as it was, for the next run
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(filled, copy)
    child = subprocess.run(
        [sys.executable, "-m", "bench.after_commit", "--child", str(copy), space,
         "--sessions", str(args.sessions), "--seed", str(args.seed)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    result |= json.loads(child.stdout.strip().splitlines()[-1])
    shutil.rmtree(copy, ignore_errors=True)
    print(json.dumps(result), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
