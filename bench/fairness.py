"""Fairness between tenants: one tenant's 10-turn session and its searches, alone and while
another tenant floods the ingest queues, with the fair lanes off and on, in one run.

    python -m bench.fairness --data ../shared/data/locomo --out bench/results/fairness.json

Real `celery worker` processes on a private `redis-server` (its own port, started and stopped
here), Qdrant in local mode, the authors' pre-extracted LoCoMo facts (no model). Each round
runs both modes, each on a fresh worker and store: warm up; time the small tenant's session
alone (several times, each in a fresh space) and its searches; submit the flood, and while it
lasts submit the small session on a fixed schedule (each in a fresh space) and search the
small tenant's space from a second thread; time the small session alone again. The figures:
the small session's time flooded against alone, its search latency flooded against alone, the
flood's own rate and the worker's CPU seconds for it (the rate moves with whatever else runs
on the machine; the CPU time much less).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import redis
from celery import Celery

from bench.metrics import percentiles
from common.celery_config import celery_config
from common.inputs.formats import read_sessions
from common.memory.changes import CommitStats
from common.models.jobs import FINISHED
from common.models.session import SessionInput
from common.producer import Producer
from common.settings import BrokerSettings, Settings, StoreSettings
from common.store import records
from common.store.backends import open_store
from common.store.coordination.roles import Coordination
from workers.launch import ROOT, WorkerProcess

QUEUES = "ingest,extract,memory,profile,query"
SAMPLE = ROOT / "cli" / "samples" / "sample_conversation.json"
SMALL, FLOOD = "small", "flood"
STATES = ("extracting", "committing", "profiling", "done")
TIMELINE = ("queued", *STATES)


@contextmanager
def private_redis(directory: Path) -> Iterator[str]:
    """A `redis-server` on a free port, no persistence, stopped on exit."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("redis-server is not installed")
    args = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    args += ["--dir", str(directory)]
    with (directory / "redis.log").open("ab") as log:
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    url = f"redis://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                redis.Redis.from_url(url).ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


def flood_items(facts: Path, sessions: int) -> list[tuple[str, SessionInput]]:
    """The first `sessions` sessions of the conversations in name order, one space each."""
    items: list[tuple[str, SessionInput]] = []
    for f in sorted(facts.glob("*.json")):
        for s in read_sessions(f).sessions:
            if len(items) == sessions:
                return items
            items.append((f.stem, s))
    return items


def small_session(facts: Path, used: set[str], turns: int) -> tuple[str, SessionInput]:
    """A session of exactly `turns` turns from a conversation the flood does not use."""
    for f in sorted(facts.glob("*.json")):
        if f.stem in used:
            continue
        for s in read_sessions(f).sessions:
            if len(s.turns) == turns:
                return f.stem, s
    raise SystemExit(f"no unused conversation has a session of {turns} turns")


def questions(conversations: Path, name: str) -> list[str]:
    doc = json.loads((conversations / f"{name}.json").read_text(encoding="utf-8"))
    return [q["question"] for q in doc["qa"] if q.get("category") in (1, 2, 3, 4)]


def producer(url: str) -> tuple[Producer, Coordination]:
    app = Celery("bench-fairness")
    app.conf.update(celery_config(Settings(broker=BrokerSettings(url=url))))
    coord = Coordination.redis(url, 3600)
    return Producer(app, coord.jobs, coord.sequence), coord


def timed_session(
    client: Producer, coord: Coordination, space: str, session: SessionInput
) -> dict[str, Any]:
    """Submit one session of the small tenant and time it to done."""
    sample = Sample(client, space, session)
    while not sample.poll(coord):
        time.sleep(0.01)
    return sample.row()


class Sample:
    """One submitted session of the small tenant, with when it was first seen in each state."""

    def __init__(self, client: Producer, space: str, session: SessionInput) -> None:
        self.began = time.perf_counter()
        (job,) = client.submit(SMALL, space, [session])
        self.job_id = job.job_id
        self.seen: dict[str, float] = {}

    def poll(self, coord: Coordination) -> bool:
        """Look at the job once; True when it is done."""
        if "done" in self.seen:
            return True
        job = coord.jobs.get_job(SMALL, self.job_id)
        if job is not None:
            self.seen.setdefault(job.state, time.perf_counter() - self.began)
            if job.state == "failed":
                raise SystemExit(f"the small session failed: {job.reason}")
        return "done" in self.seen

    def row(self) -> dict[str, Any]:
        return {
            "seconds": round(self.seen["done"], 3),
            "states": {s: round(self.seen[s], 3) for s in STATES if s in self.seen},
        }


class Searcher(threading.Thread):
    """Searches the small tenant's space one after another (with a pause) until stopped or
    `limit` are done (a fixed number keeps the work beside the flood the same in both modes)."""

    def __init__(self, url: str, space: str, asks: Sequence[str], pause: float, limit: int) -> None:
        super().__init__(daemon=True)
        self.client, self.coord = producer(url)
        self.space, self.asks, self.pause, self.limit = space, asks, pause, limit
        self.stop = threading.Event()
        self.latencies: list[float] = []

    def run(self) -> None:
        i = 0
        while not self.stop.is_set() and i < self.limit:
            began = time.perf_counter()
            self.client.search(SMALL, self.space, self.asks[i % len(self.asks)], timeout=300)
            self.latencies.append((time.perf_counter() - began) * 1000)
            i += 1
            self.stop.wait(self.pause)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux), to compare work done whatever else
    runs on the machine."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_mode(fair: bool, args: argparse.Namespace, url: str, work: Path) -> dict[str, Any]:
    data = Path(tempfile.mkdtemp(prefix="fair-" if fair else "fifo-", dir=work))
    flood = flood_items(args.data / "atommem_facts", args.flood_sessions)
    conv, small = small_session(args.data / "atommem_facts", {s for s, _ in flood}, args.turns)
    asks = questions(args.data / "conversations", conv)
    alone = [f"alone-{i}" for i in range(2 * args.alone)]  # before the flood and after it
    flooded = [f"flooded-{i}" for i in range(args.samples)]
    store = open_store(StoreSettings(qdrant_path=data / "qdrant"), 384)
    for space in {s for s, _ in flood}:
        records.create_space(store, FLOOD, space)
    for space in [*alone, *flooded]:
        records.create_space(store, SMALL, space)
    records.create_space(store, "warm", "warmup")
    store.close()
    redis.Redis.from_url(url).flushdb()
    env = dict(
        os.environ,
        ATOMMEM_BROKER__URL=url,
        ATOMMEM_STORE__QDRANT_PATH=str(data / "qdrant"),
        ATOMMEM_FAIR__ENABLED=str(fair).lower(),
        ATOMMEM_BROKER__QUERY_CONCURRENCY=str(args.query_concurrency),
    )
    worker = WorkerProcess(env, data / "worker.log", QUEUES, args.concurrency, name="all")
    try:
        worker.wait_ready()
        client, coord = producer(url)
        warm = client.submit("warm", "warmup", read_sessions(SAMPLE).sessions)
        client.wait("warm", [j.job_id for j in warm], timeout=600)
        client.search("warm", "warmup", "warm up", timeout=120)

        alone_runs = [timed_session(client, coord, space, small) for space in alone[: args.alone]]
        client.search(SMALL, alone[0], asks[0], timeout=120)  # load the space index
        searcher = Searcher(url, alone[0], asks, pause=0.0, limit=args.queries)
        searcher.start()
        searcher.join()
        search_alone = searcher.latencies

        # The flood, and the small session at `offset + k * interval` s (the same in both
        # modes, so the flood shares the workers with the same work).
        searcher = Searcher(
            url, alone[0], asks, pause=args.search_pause, limit=args.flooded_queries
        )
        cpu_before = cpu_seconds(worker.proc.pid)
        submitted = time.time()
        started = time.perf_counter()
        jobs = client.submit_many(FLOOD, flood)
        searcher.start()
        samples: list[tuple[float, Sample]] = []
        flood_done, checked = False, 0.0
        timeline: list[list[float]] = []
        while not (flood_done and all(s.poll(coord) for _, s in samples)):
            now = time.perf_counter()
            due = started + args.offset + len(samples) * args.interval
            if not flood_done and len(samples) < len(flooded) and now >= due:
                samples.append((now - started, Sample(client, flooded[len(samples)], small)))
            for _, sample in samples:
                sample.poll(coord)
            if not flood_done and now - checked > 0.2:
                checked = now
                states = [coord.jobs.get_job(FLOOD, j.job_id) for j in jobs]
                flood_done = all(j is not None and j.state in FINISHED for j in states)
                if now - started >= len(timeline):  # the flood's jobs by state, each second
                    counts = Counter(str(j.state) for j in states if j is not None)
                    timeline.append([round(now - started, 1), *(counts[s] for s in TIMELINE)])
                if flood_done:
                    searcher.stop.set()
            time.sleep(0.01)
        cpu = cpu_seconds(worker.proc.pid) - cpu_before
        searcher.join()
        finished = client.wait(FLOOD, [j.job_id for j in jobs], timeout=60)
        flood_seconds = max(j.updated_at for j in finished) - submitted
        flooded_runs = [{"submitted_at_s": round(at, 2), **s.row()} for at, s in samples]
        alone_runs += [timed_session(client, coord, space, small) for space in alone[args.alone :]]
        coord.close()
    finally:
        worker.stop()
        if args.logs is not None:
            args.logs.mkdir(parents=True, exist_ok=True)
            shutil.copy(data / "worker.log", args.logs / f"{data.name}.log")
    total = CommitStats()
    for job in finished:
        total.add(CommitStats.from_counts(job.counts))
    return {
        "fair": fair,
        "small_alone": alone_runs,
        "small_flooded": flooded_runs,
        "search_ms_alone": search_alone,
        "search_ms_flooded": searcher.latencies,
        "flood": {
            "sessions": len(finished),
            "failed": sum(1 for j in finished if j.state != "done"),
            "turns": total.turns,
            "facts_in": total.facts_in,
            "seconds": round(flood_seconds, 2),
            "facts_per_s": round(total.facts_in / flood_seconds, 2),
            "turns_per_s": round(total.turns / flood_seconds, 2),
            "worker_cpu_s": round(cpu, 1),
            "timeline": {"columns": ["s", *TIMELINE], "rows": timeline},
        },
    }


def summary(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One mode over its rounds: the small session's times and ratio (median and worst of all
    its flooded samples against the median alone), search latency, the flood's rate."""
    alone = [r["seconds"] for row in rows for r in row["small_alone"]]
    flooded = [r["seconds"] for row in rows for r in row["small_flooded"]]
    floor = statistics.median(alone)
    search_alone = [ms for row in rows for ms in row["search_ms_alone"]]
    search_flooded = [ms for row in rows for ms in row["search_ms_flooded"]]
    return {
        "small_session": {
            "alone_median_s": round(floor, 3),
            "flooded_median_s": round(statistics.median(flooded), 3),
            "flooded_max_s": round(max(flooded), 3),
            "ratio_median": round(statistics.median(flooded) / floor, 2),
            "ratio_max": round(max(flooded) / floor, 2),
            "samples": {"alone": len(alone), "flooded": len(flooded)},
        },
        "search_ms": {
            "alone": {"queries": len(search_alone), **percentiles(search_alone)},
            "flooded": {"queries": len(search_flooded), **percentiles(search_flooded)},
        },
        "flood": {
            "facts_per_s": [row["flood"]["facts_per_s"] for row in rows],
            "facts_per_s_median": round(
                statistics.median(row["flood"]["facts_per_s"] for row in rows), 2
            ),
            "worker_cpu_s": [row["flood"]["worker_cpu_s"] for row in rows],
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="the LoCoMo directory")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--flood-sessions", type=int, default=60)
    parser.add_argument("--turns", type=int, default=10, help="turns of the small session")
    parser.add_argument(
        "--alone", type=int, default=3, help="small sessions timed alone, before and after"
    )
    parser.add_argument("--samples", type=int, default=8, help="small sessions in the flood")
    parser.add_argument("--offset", type=float, default=2.0, help="s from flood to 1st sample")
    parser.add_argument("--interval", type=float, default=4.0, help="s between samples")
    parser.add_argument("--queries", type=int, default=40, help="searches timed alone")
    parser.add_argument("--flooded-queries", type=int, default=100, help="at most, flooded")
    parser.add_argument("--search-pause", type=float, default=0.25)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument(
        "--query-concurrency", type=int, default=2, help="the worker's query slots (0: off)"
    )
    parser.add_argument("--rounds", type=int, default=2, help="each round runs off, then on")
    parser.add_argument("--modes", nargs="+", default=["off", "on"], choices=["off", "on"])
    parser.add_argument("--logs", type=Path, help="keep each run's worker log here")
    args = parser.parse_args()
    result: dict[str, Any] = {
        "command": f"python -m bench.fairness --data {args.data} --out {args.out}",
        "machine": {"cpus": os.cpu_count()},
        "layout": f"one worker process, queues {QUEUES}, -P threads -c {args.concurrency}, "
        f"query slots {args.query_concurrency}",
        "settings": {k: str(v) for k, v in vars(args).items() if k not in ("data", "out", "logs")},
        "summary": {},
        "runs": [],
    }
    with tempfile.TemporaryDirectory() as tmp, private_redis(Path(tmp)) as url:
        for round_ in range(args.rounds):
            for mode in args.modes:
                row = run_mode(mode == "on", args, url, Path(tmp))
                result["runs"].append({"round": round_, "mode": mode, **row})
                flood = {k: v for k, v in row["flood"].items() if k != "timeline"}
                print(json.dumps({"round": round_, "mode": mode, "flood": flood}))
    for mode in args.modes:
        rows = [r for r in result["runs"] if r["mode"] == mode]
        result["summary"][mode] = summary(rows)
        print(json.dumps({mode: result["summary"][mode]}))
    if {"on", "off"} <= result["summary"].keys():
        on, off = result["summary"]["on"], result["summary"]["off"]
        result["comparison"] = {
            "small_ratio_median_off": off["small_session"]["ratio_median"],
            "small_ratio_median_on": on["small_session"]["ratio_median"],
            "small_ratio_max_off": off["small_session"]["ratio_max"],
            "small_ratio_max_on": on["small_session"]["ratio_max"],
            "flood_facts_per_s_on_over_off": round(
                on["flood"]["facts_per_s_median"] / off["flood"]["facts_per_s_median"], 3
            ),
            "flood_worker_cpu_on_over_off": round(
                statistics.median(on["flood"]["worker_cpu_s"])
                / statistics.median(off["flood"]["worker_cpu_s"]),
                3,
            ),
        }
        print(json.dumps(result["comparison"]))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
