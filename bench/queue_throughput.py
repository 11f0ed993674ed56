"""Ingest throughput through Celery + Redis with 1 and 2 worker processes, side by side
with the embedding-only rate, and where the time goes.

    python -m bench.queue_throughput --facts ../shared/data/locomo/atommem_facts \\
        --out bench/results/queue_throughput.json

Layouts: `1` = one process consuming every queue; `2` = an extract-only process (the GPU
pool's role; it never opens the store) plus one process for ingest/memory/profile/query,
the store's owner. A private `redis-server`; the sessions carry the pre-extracted facts, so
extraction is their metadata and embedding.

The profile of each layout, read from the workers' Prometheus endpoints and /proc:
- each queue's busy seconds (`atommem_task_duration_seconds_sum`), per task name;
- each worker process's CPU seconds, Redis's (its INFO), and this process's while waiting,
  against the CPU seconds the embedding-only run took for the same facts.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import redis

from bench.fairness import private_redis, producer
from bench.observe import embedding_only, free_port, own_cpu, process_cpu, scrape
from common.inputs.formats import read_sessions
from common.memory.changes import CommitStats
from common.queues import Queue
from common.settings import StoreSettings
from common.store import keys, records
from common.store.backends import open_store
from workers.launch import ROOT, WorkerProcess

LAYOUTS = {
    1: [("all", "ingest,extract,memory,profile,query")],
    2: [("extract", "extract"), ("memory", "ingest,memory,profile,query")],
}
SAMPLE = ROOT / "cli" / "samples" / "sample_conversation.json"


def scrape_busy(port: int) -> dict[str, float]:
    """Busy seconds per task name and per stage (`stage:<name>`) from a worker's metrics."""
    out: dict[str, float] = {}
    for (name, labels), value in scrape(port).items():
        if name == "atommem_task_duration_seconds_sum":
            key = dict(labels)["task"]
        elif name == "atommem_stage_duration_seconds_sum":
            key = "stage:" + dict(labels)["stage"]
        else:
            continue
        out[key] = out.get(key, 0.0) + value
    return out


def run_layout(
    processes: int, files: list[Path], url: str, work: Path, slots: dict[str, int]
) -> dict[str, Any]:
    data = work / f"layout-{processes}"
    spaces = {f.stem: read_sessions(f) for f in files}
    store = open_store(StoreSettings(qdrant_path=data / "qdrant"), 384)
    for space in [*spaces, "warmup"]:
        records.create_space(store, "bench", space)
    store.close()
    r = redis.Redis.from_url(url)
    r.flushdb()
    env = dict(
        os.environ,
        ATOMMEM_BROKER__URL=url,
        ATOMMEM_STORE__QDRANT_PATH=str(data / "qdrant"),
        ATOMMEM_LOG__FORMAT="text",
    )
    ports = {name: free_port() for name, _ in LAYOUTS[processes]}
    workers = {
        name: WorkerProcess(
            env | {"ATOMMEM_METRICS__PORT": str(ports[name])},
            data / f"{name}.log",
            queues,
            concurrency=slots.get(name, slots["all"]),
            name=name,
        )
        for name, queues in LAYOUTS[processes]
    }
    try:
        for w in workers.values():
            w.wait_ready()
        client, coord = producer(url)
        warm = client.submit("bench", "warmup", read_sessions(SAMPLE).sessions)
        client.wait("bench", [j.job_id for j in warm], timeout=300)  # models loaded everywhere
        for q in Queue:
            r.delete(keys.queue_wait(q.value))
        items = [(space, s) for space, inp in spaces.items() for s in inp.sessions]
        busy_before = {name: scrape_busy(port) for name, port in ports.items()}
        cpu_before = {name: process_cpu(w.proc.pid) for name, w in workers.items()}
        redis_before = r.info("cpu")
        own_before = own_cpu()
        started = time.perf_counter()
        jobs = client.submit_many("bench", items)
        finished = client.wait("bench", [j.job_id for j in jobs], timeout=3600, poll=0.2)
        seconds = time.perf_counter() - started
        own = own_cpu() - own_before
        redis_after = r.info("cpu")
        cpu = {name: process_cpu(w.proc.pid) - cpu_before[name] for name, w in workers.items()}
        busy = {}
        for name, port in ports.items():
            after = scrape_busy(port)
            busy[name] = {
                task.removeprefix("atommem."): round(
                    after[task] - busy_before[name].get(task, 0), 2
                )
                for task in sorted(after)
                if after[task] - busy_before[name].get(task, 0) > 0.005
            }
        waits = {}
        for q in Queue:
            samples = coord.waits.waits(q.value)
            if samples:
                ordered = sorted(samples)
                waits[q.value] = {
                    "tasks": len(samples),
                    "median_ms": round(statistics.median(samples) * 1000, 2),
                    "p95_ms": round(ordered[int(0.95 * (len(ordered) - 1))] * 1000, 2),
                }
        coord.close()
    finally:
        for w in workers.values():
            w.stop()
    total = CommitStats()
    for job in finished:
        total.add(CommitStats.model_validate(job.counts))
    failed = [j.job_id for j in finished if j.state != "done"]
    redis_cpu = sum(redis_after[k] - redis_before[k] for k in ("used_cpu_sys", "used_cpu_user"))
    return {
        "processes": processes,
        "layout": [
            {"name": n, "queues": q, "slots": slots.get(n, slots["all"])}
            for n, q in LAYOUTS[processes]
        ],
        "sessions": len(finished),
        "failed": failed,
        "facts_in": total.facts_in,
        "seconds": round(seconds, 2),
        "facts_per_s": round(total.facts_in / seconds, 1),
        "queue_wait": waits,
        "busy_s": busy,
        "cpu_s": {name: round(v, 1) for name, v in cpu.items()}
        | {"redis": round(redis_cpu, 1), "producer_waiting": round(own, 1)},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--facts", type=Path, required=True, help="pre-extracted LoCoMo facts dir")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--layouts", type=int, nargs="+", default=[1, 2], choices=[1, 2])
    parser.add_argument("--slots", type=int, default=2, help="threads of every worker")
    parser.add_argument("--extract-slots", type=int, help="threads of layout 2's extract worker")
    parser.add_argument("--memory-slots", type=int, help="threads of layout 2's memory worker")
    args = parser.parse_args()
    slots = {"all": args.slots}
    if args.extract_slots:
        slots["extract"] = args.extract_slots
    if args.memory_slots:
        slots["memory"] = args.memory_slots
    files = sorted(args.facts.glob("*.json"))
    texts = [
        fact
        for f in files
        for turn in read_sessions(f).sessions
        for t in turn.turns
        for fact in (t.facts or [])
    ]
    rate, floor_cpu = embedding_only(texts)
    result: dict[str, Any] = {
        "command": "python -m bench.queue_throughput " + " ".join(sys.argv[1:]),
        "machine": {"cpus": os.cpu_count()},
        "conversations": [f.stem for f in files],
        "embedding_only_facts_per_s": round(rate, 1),
        "embedding_only_cpu_s": round(floor_cpu, 1),
        "layouts": [],
    }
    with tempfile.TemporaryDirectory() as work, private_redis(Path(work)) as url:
        for processes in args.layouts:
            row = run_layout(processes, files, url, Path(work), slots)
            row["ratio_to_embedding_only"] = round(
                row["facts_per_s"] / result["embedding_only_facts_per_s"], 3
            )
            result["layouts"].append(row)
            print(json.dumps(row), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"embedding only: {result['embedding_only_facts_per_s']} facts/s; wrote {args.out}")


if __name__ == "__main__":
    main()
