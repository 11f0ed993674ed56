"""Ingest throughput through Celery + Redis with 1 and 2 worker processes, side by side
with the embedding-only rate, and the median time tasks wait in each queue.

    python -m bench.queue_throughput --facts ../shared/data/locomo/atommem_facts \\
        --out bench/results/queue_throughput.json

Layouts: `1` = one process consuming every queue; `2` = an extract-only process (the GPU
pool's role; it never opens the store) plus one process for ingest/memory/profile/query.
Both keep Qdrant in local mode, which only the second process opens.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import redis
from celery import Celery

from common.celery_config import celery_config
from common.embeddings import Embedder
from common.inputs.formats import read_sessions
from common.memory.changes import CommitStats
from common.producer import Producer
from common.queues import Queue
from common.settings import BrokerSettings, EmbeddingSettings, Settings, StoreSettings
from common.store import keys, records
from common.store.backends import open_store
from common.store.coordination.roles import Coordination
from workers.launch import ROOT, WorkerProcess

LAYOUTS = {
    1: [("all", "ingest,extract,memory,profile,query")],
    2: [("extract", "extract"), ("memory", "ingest,memory,profile,query")],
}
SAMPLE = ROOT / "cli" / "samples" / "sample_conversation.json"


def embedding_only_rate(texts: list[str]) -> float:
    embedder = Embedder(EmbeddingSettings())
    embedder.encode(texts[:64])
    started = time.perf_counter()
    embedder.encode(texts)
    return len(texts) / (time.perf_counter() - started)


def run_layout(processes: int, files: list[Path], redis_url: str, work: Path) -> dict[str, Any]:
    data = work / f"layout-{processes}"
    spaces = {f.stem: read_sessions(f) for f in files}
    store = open_store(StoreSettings(qdrant_path=data / "qdrant"), 384)
    for space in [*spaces, "warmup"]:
        records.create_space(store, "bench", space)
    store.close()
    r = redis.Redis.from_url(redis_url)
    r.flushdb()
    env = dict(
        os.environ, ATOMMEM_BROKER__URL=redis_url, ATOMMEM_STORE__QDRANT_PATH=str(data / "qdrant")
    )
    workers = [
        WorkerProcess(env, data / f"{name}.log", queues, concurrency=2, name=name)
        for name, queues in LAYOUTS[processes]
    ]
    try:
        for w in workers:
            w.wait_ready()
        app = Celery("bench-producer")
        app.conf.update(celery_config(Settings(broker=BrokerSettings(url=redis_url))))
        coord = Coordination.redis(redis_url, 3600)
        client = Producer(app, coord.jobs, coord.sequence)
        warm = client.submit("bench", "warmup", read_sessions(SAMPLE).sessions)
        client.wait("bench", [j.job_id for j in warm], timeout=300)  # models loaded everywhere
        for q in Queue:
            r.delete(keys.queue_wait(q.value))
        items = [(space, s) for space, inp in spaces.items() for s in inp.sessions]
        started = time.perf_counter()
        jobs = client.submit_many("bench", items)
        finished = client.wait("bench", [j.job_id for j in jobs], timeout=3600)
        seconds = time.perf_counter() - started
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
    finally:
        for w in workers:
            w.stop()
    total = CommitStats()
    for job in finished:
        total.add(CommitStats.model_validate(job.counts))
    failed = [j.job_id for j in finished if j.state != "done"]
    return {
        "processes": processes,
        "layout": [{"name": n, "queues": q} for n, q in LAYOUTS[processes]],
        "sessions": len(finished),
        "failed": failed,
        "facts_in": total.facts_in,
        "seconds": round(seconds, 2),
        "facts_per_s": round(total.facts_in / seconds, 1),
        "queue_wait": waits,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--facts", type=Path, required=True, help="pre-extracted LoCoMo facts dir")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/12")
    parser.add_argument("--layouts", type=int, nargs="+", default=[1, 2], choices=[1, 2])
    args = parser.parse_args()
    files = sorted(args.facts.glob("*.json"))
    texts = [
        fact
        for f in files
        for turn in read_sessions(f).sessions
        for t in turn.turns
        for fact in (t.facts or [])
    ]
    result: dict[str, Any] = {
        "command": f"python -m bench.queue_throughput --facts {args.facts} --out {args.out}",
        "machine": {"cpus": os.cpu_count()},
        "conversations": [f.stem for f in files],
        "embedding_only_facts_per_s": round(embedding_only_rate(texts), 1),
        "layouts": [],
    }
    with tempfile.TemporaryDirectory() as work:
        for processes in args.layouts:
            row = run_layout(processes, files, args.redis_url, Path(work))
            row["ratio_to_embedding_only"] = round(
                row["facts_per_s"] / result["embedding_only_facts_per_s"], 3
            )
            result["layouts"].append(row)
            print(json.dumps(row))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"embedding only: {result['embedding_only_facts_per_s']} facts/s; wrote {args.out}")


if __name__ == "__main__":
    main()
