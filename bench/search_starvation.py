"""Ingestion under search load on one worker: sessions done per second alone and while
clients search at a set rate, in one run.

    python -m bench.search_starvation --data ../shared/data/locomo --out bench/results/starve.json

One real `celery worker` (all queues) on a private `redis-server`, the embedded store, the
authors' pre-extracted LoCoMo facts (no model). Warm up; ingest `--tenants` × `--per-tenant`
10-turn sessions alone and time them to done; then the same in fresh spaces while `--clients`
threads search at `--rate` searches per second in all. The figures: sessions per second alone
and under load, their ratio, the searches per second achieved, and when the first session of
each phase was done.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.fairness import private_redis, producer
from common.inputs.formats import read_sessions
from common.models.session import SessionInput
from common.producer import Producer
from common.settings import StoreSettings
from common.store import records
from common.store.backends import open_store
from workers.launch import WorkerProcess

QUEUES = "ingest,extract,memory,profile,query"


def ten_turn_sessions(facts: Path, count: int) -> list[SessionInput]:
    """The first ten turns of the first `count` sessions that have as many (ids made unique
    across conversations)."""
    found = [
        s.model_copy(update={"session_id": f"{f.stem}-{s.session_id}", "turns": s.turns[:10]})
        for f in sorted(facts.glob("*.json"))
        for s in read_sessions(f).sessions
        if len(s.turns) >= 10
    ]
    if len(found) < count:
        raise SystemExit(f"only {len(found)} sessions of ten turns or more")
    return found[:count]


def phase(
    client: Producer, tenants: list[str], space: str, sessions: list[SessionInput], per: int
) -> dict[str, Any]:
    """Submit every tenant's sessions into `space` and time them to done."""
    start = time.time()
    jobs = {
        t: [j.job_id for j in client.submit(t, space, sessions[i * per : (i + 1) * per])]
        for i, t in enumerate(tenants)
    }
    done = [j for t, ids in jobs.items() for j in client.wait(t, ids, timeout=1800)]
    ends = sorted(j.updated_at for j in done)
    total = ends[-1] - start
    return {
        "sessions": len(done),
        "states": sorted({j.state for j in done}),
        "seconds": round(total, 2),
        "sessions_per_s": round(len(done) / total, 3),
        "first_done_s": round(ends[0] - start, 2),
    }


class Searcher(threading.Thread):
    def __init__(self, client: Producer, tenant: str, space: str, rate: float) -> None:
        super().__init__(daemon=True)
        self.client, self.tenant, self.space, self.pause = client, tenant, space, 1.0 / rate
        self.stop = threading.Event()
        self.done = 0
        self.errors = 0

    def run(self) -> None:
        due = time.monotonic()
        while not self.stop.is_set():
            try:
                self.client.search(self.tenant, self.space, "what did they talk about?", timeout=60)
                self.done += 1
            except Exception:  # noqa: BLE001 - counted and reported
                self.errors += 1
            due += self.pause
            time.sleep(max(0.0, due - time.monotonic()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="the LoCoMo directory")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--tenants", type=int, default=5)
    parser.add_argument("--per-tenant", type=int, default=10)
    parser.add_argument("--clients", type=int, default=5)
    parser.add_argument("--rate", type=float, default=19.0, help="searches/s in all")
    parser.add_argument("--concurrency", type=int, default=2)
    args = parser.parse_args()
    tenants = [f"t{i}" for i in range(args.tenants)]
    sessions = ten_turn_sessions(args.data / "atommem_facts", args.tenants * args.per_tenant)
    work = Path(tempfile.mkdtemp(prefix="starve-"))
    store = open_store(StoreSettings(qdrant_path=work / "qdrant"), 384)
    for t in tenants:
        for space in ("warm", "alone", "loaded"):
            records.create_space(store, t, space)
    store.close()
    with private_redis(work) as url:
        env = dict(
            os.environ, ATOMMEM_BROKER__URL=url, ATOMMEM_STORE__QDRANT_PATH=str(work / "qdrant")
        )
        worker = WorkerProcess(env, work / "worker.log", QUEUES, args.concurrency, name="all")
        client, coord = producer(url)
        try:
            worker.wait_ready()
            client.search(tenants[0], "warm", "warm up", timeout=120)
            phase(client, tenants[:1], "warm", sessions[:1], 1)
            alone = phase(client, tenants, "alone", sessions, args.per_tenant)
            searchers = [
                Searcher(client, tenants[i % len(tenants)], "alone", args.rate / args.clients)
                for i in range(args.clients)
            ]
            for s in searchers:
                s.start()
            time.sleep(2.0)  # the load is under way before the sessions come
            before, started = sum(s.done for s in searchers), time.monotonic()
            loaded = phase(client, tenants, "loaded", sessions, args.per_tenant)
            elapsed = time.monotonic() - started
            searched = sum(s.done for s in searchers) - before
            for s in searchers:
                s.stop.set()
            for s in searchers:
                s.join(90)
        finally:
            worker.stop()
            coord.close()
    loaded["searches_per_s"] = round(searched / elapsed, 2)
    loaded["search_errors"] = sum(s.errors for s in searchers)
    out = {
        "concurrency": args.concurrency,
        "alone": alone,
        "under_search_load": loaded,
        "ratio": round(loaded["sessions_per_s"] / alone["sessions_per_s"], 3),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
