"""Scale-out: ingest throughput against the extract pool's slots when the model is the
bottleneck, and where the next bottleneck sits.

    python -m bench.scale_out --data ../shared/data/locomo --out bench/results/scale_out

Real `celery worker` processes on a private `redis-server`: one extract worker with N slots
(threads, or `--pool prefork`) and one store-owning worker for ingest, memory, profile and
query. The extractor role runs on the `openai` backend against a **stand-in model pool**
(bench/model_pool.py: an OpenAI-compatible server on loopback that answers each turn with
its pre-extracted LoCoMo facts after a configured latency, with a concurrency limit and a
queue; not a model); the general role is `rules`. The dialogue goes in without facts, so
every turn is a real HTTP call through the backend's retries, budgets and token accounting.

For each model latency and N, a fresh set of spaces (each LoCoMo conversation once per
tenant) receives:
- a **burst**: sessions submitted at once, round robin over the spaces, sized to last about
  `--burst-s`; its sessions per second is the throughput;
- a **steady** arrival at `--steady-share` of that throughput for `--steady-s`, as a chat
  backend sends finished sessions; its submit-to-done p50/p95 is the latency users see.

Pool utilisation, queue waits, model calls in flight and the store's size are read from the
workers' Prometheus endpoints (docs/operations.md, "Metrics"), before and after each phase;
Redis commands and bytes from its INFO. The embedding-only rate (every fact of the
conversations embedded at once, in this process) is the floor of the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from bench.fairness import private_redis, producer
from bench.observe import (
    Samples,
    bucket_quantile,
    delta,
    embedding_only_rate,
    free_port,
    host_cpu,
    scrape,
    total,
)
from common.inputs.formats import read_sessions
from common.models.session import SessionInput
from common.producer import Producer
from workers.launch import ROOT, WorkerProcess

TENANTS = ("acme", "globex", "initech")
MEMORY_QUEUES = "ingest,memory,profile,query"
POOLS = {"extract": "extract", "memory": "memory"}  # pool name: the queue whose slots it is


# --- the workload -----------------------------------------------------------------------------


@dataclass
class Workload:
    """The LoCoMo conversations as a chat backend's traffic: each conversation a space per
    tenant, sessions in order within a space, round robin over the spaces."""

    conversations: dict[str, list[SessionInput]]

    def sessions(self, tag: str) -> Iterator[tuple[str, str, SessionInput]]:
        """(tenant, space, session), every space's first session, then every second, ..."""
        lanes = [
            (tenant, f"{conv}-{tag}", sessions)
            for conv, sessions in self.conversations.items()
            for tenant in TENANTS
        ]
        depth = max(len(s) for _, _, s in lanes)
        for i in range(depth):
            for tenant, space, sessions in lanes:
                if i < len(sessions):
                    yield tenant, space, sessions[i]


def load_workload(data: Path) -> Workload:
    """The conversations' dialogue (the stand-in answers each turn from the facts files)."""
    conversations: dict[str, list[SessionInput]] = {}
    for path in sorted((data / "conversations").glob("*.json")):
        conversations[path.stem] = read_sessions(path).sessions
    return Workload(conversations)


def fact_texts(data: Path) -> list[str]:
    """Every pre-extracted fact's text, for the embedding-only rate."""
    return [
        fact
        for path in sorted((data / "atommem_facts").glob("*.json"))
        for session in read_sessions(path).sessions
        for turn in session.turns
        for fact in turn.facts or []
    ]


# --- the processes ----------------------------------------------------------------------------


@contextmanager
def stand_in(facts: Path, latency_s: float, concurrency: int, work: Path) -> Iterator[str]:
    """The stand-in model pool in its own process (its threads off this one's GIL)."""
    log = (work / f"pool-{latency_s:g}.log").open("ab")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bench.model_pool",
            "--facts",
            str(facts),
            "--latency-ms",
            str(round(latency_s * 1000)),
            "--concurrency",
            str(concurrency),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        if not url.startswith("http"):
            raise RuntimeError(f"the stand-in did not start: {url!r}")
        yield url
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
        log.close()


def pool_stats(base_url: str, reset: bool = False) -> dict[str, Any]:
    root = base_url.removesuffix("/v1")
    request = urllib.request.Request(
        f"{root}/stats/reset" if reset else f"{root}/stats", method="POST" if reset else "GET"
    )
    with urllib.request.urlopen(request, timeout=10) as reply:
        body: dict[str, Any] = json.loads(reply.read())
    return body


# --- reading the metrics ----------------------------------------------------------------------


@dataclass
class Probe:
    """What the metrics, Redis and the stand-in say at one moment."""

    at: float
    workers: dict[str, Samples]
    redis_info: dict[str, Any]
    cpu: tuple[float, float]
    pool: dict[str, Any] = field(default_factory=dict)


def probe(ports: dict[str, int], r: redis.Redis, pool_url: str) -> Probe:
    return Probe(
        at=time.monotonic(),
        workers={name: scrape(port) for name, port in ports.items()},
        redis_info=dict(r.info("stats")) | {"used_memory": r.info("memory")["used_memory"]},
        cpu=host_cpu(),
        pool=pool_stats(pool_url),
    )


def measured(before: Probe, after: Probe, sessions: int, facts: int) -> dict[str, Any]:
    """A phase's figures from two probes: pools' utilisation, queue waits, model calls."""
    wall = after.at - before.at
    ex_b, ex_a = before.workers["extract"], after.workers["extract"]
    mem_b, mem_a = before.workers["memory"], after.workers["memory"]
    pools: dict[str, Any] = {}
    for name, queue in POOLS.items():
        b, a = before.workers[name], after.workers[name]
        busy = delta(a, b, "atommem_task_duration_seconds_sum", queue=queue)
        slots = total(a, "atommem_worker_slots", queue=queue)
        pools[name] = {
            "slots": int(slots),
            "busy_s": round(busy, 2),
            "utilisation": round(busy / (slots * wall), 3) if slots and wall else None,
        }
    waits: dict[str, Any] = {}
    for queue in ("ingest", "extract", "memory"):
        side_b, side_a = (ex_b, ex_a) if queue == "extract" else (mem_b, mem_a)
        n = delta(side_a, side_b, "atommem_queue_wait_seconds_count", queue=queue)
        if n:
            s = delta(side_a, side_b, "atommem_queue_wait_seconds_sum", queue=queue)
            p50 = bucket_quantile(side_a, side_b, "atommem_queue_wait_seconds", 0.5, queue=queue)
            waits[queue] = {"tasks": int(n), "mean_ms": round(s / n * 1000, 1)}
            waits[queue]["p50_ms"] = round(p50 * 1000, 1)
    calls = delta(ex_a, ex_b, "atommem_model_call_duration_seconds_count")
    in_call = delta(ex_a, ex_b, "atommem_model_call_duration_seconds_sum")
    tokens = {
        kind: int(delta(ex_a, ex_b, "atommem_model_tokens_total", kind=kind))
        for kind in ("prompt", "completion")
    }
    busy_cpu = after.cpu[0] - before.cpu[0]
    all_cpu = after.cpu[1] - before.cpu[1]
    ri_b, ri_a = before.redis_info, after.redis_info
    return {
        "wall_s": round(wall, 2),
        "pools": pools,
        "queue_wait": waits,
        "model": {
            "http_calls": int(calls),
            "mean_in_flight": round(in_call / wall, 2) if wall else None,
            "max_in_flight_at_pool": after.pool.get("max_in_flight"),
            "mean_call_ms": round(in_call / calls * 1000, 1) if calls else None,
            "tokens": tokens,
            "pool_utilisation": after.pool.get("utilisation"),
        },
        "redis": {
            "commands": int(ri_a["total_commands_processed"] - ri_b["total_commands_processed"]),
            "net_in_bytes": int(ri_a["total_net_input_bytes"] - ri_b["total_net_input_bytes"]),
            "net_out_bytes": int(ri_a["total_net_output_bytes"] - ri_b["total_net_output_bytes"]),
            "used_memory_bytes": int(ri_a["used_memory"]),
        },
        "store_bytes": int(total(mem_a, "atommem_store_bytes")),
        "host_cpu_busy": round(busy_cpu / all_cpu, 3) if all_cpu else None,
        "sessions": sessions,
        "facts": facts,
    }


def bottleneck(figures: dict[str, Any]) -> str:
    """The stage that held throughput back: a pool near its slots, else the machine."""
    util = {name: p["utilisation"] or 0.0 for name, p in figures["pools"].items()}
    busiest = max(util, key=lambda n: util[n])
    if util[busiest] >= 0.85:
        return f"{busiest} pool ({util[busiest]:.0%} of its slots busy)"
    if (figures["host_cpu_busy"] or 0) >= 0.9:
        return f"the machine's CPUs ({figures['host_cpu_busy']:.0%} busy)"
    return f"none saturated (busiest: {busiest}, {util[busiest]:.0%})"


# --- one operating point ----------------------------------------------------------------------


def finish(client: Producer, jobs: list[tuple[str, str]], timeout: float) -> dict[str, Any]:
    """Wait for the jobs (tenant, job id); their states and submit-to-done seconds."""
    by_tenant: dict[str, list[str]] = {}
    for tenant, job_id in jobs:
        by_tenant.setdefault(tenant, []).append(job_id)
    done: list[float] = []
    failed = facts = 0
    for tenant, ids in by_tenant.items():
        for job in client.wait(tenant, ids, timeout=timeout, poll=0.2):
            if job.state == "done":
                done.append(job.updated_at - job.created_at)
                facts += job.counts.get("facts_in", 0)
            else:
                failed += 1
    ordered = sorted(done)
    pick = (
        (lambda q: round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2))
        if done
        else (lambda q: None)
    )
    return {
        "done": len(done),
        "failed": failed,
        "facts": facts,
        "p50_s": pick(0.5),
        "p95_s": pick(0.95),
    }


def submit(client: Producer, items: list[tuple[str, str, SessionInput]]) -> list[tuple[str, str]]:
    by_tenant: dict[str, list[tuple[str, SessionInput]]] = {}
    for tenant, space, session in items:
        by_tenant.setdefault(tenant, []).append((space, session))
    jobs: list[tuple[str, str]] = []
    for tenant, pairs in by_tenant.items():
        jobs += [(tenant, j.job_id) for j in client.submit_many(tenant, pairs)]
    return jobs


def operating_point(
    n: int,
    latency_s: float,
    pool_kind: str,
    args: argparse.Namespace,
    workload: Workload,
    env: dict[str, str],
    work: Path,
    client: Producer,
    r: redis.Redis,
    memory_port: int,
    pool_url: str,
) -> dict[str, Any]:
    """One extract worker with `n` slots against the stand-in at `latency_s`: a burst, then
    a steady arrival."""
    tag = f"{pool_kind[0]}{n}-{round(latency_s * 1000)}"
    port = free_port()
    extract_env = env | {"ATOMMEM_METRICS__PORT": str(port)}
    if pool_kind == "prefork":
        multiproc = work / f"prom-{tag}"
        multiproc.mkdir()
        extract_env["PROMETHEUS_MULTIPROC_DIR"] = str(multiproc)
    worker = WorkerProcess(
        extract_env, work / f"extract-{tag}.log", "extract", n, f"extract-{tag}", pool=pool_kind
    )
    try:
        worker.wait_ready(180)
        ports = {"extract": port, "memory": memory_port}
        for tenant in TENANTS:
            for conv in workload.conversations:
                client.create_space(tenant, f"{conv}-{tag}")
        traffic = workload.sessions(tag)
        # about --burst-s of work if every slot's calls took the model's latency alone
        ideal = n / (2.4 * (latency_s + 0.15))  # sessions/s: ~2.4 chunks a session
        size = max(args.min_burst, min(args.max_burst, round(ideal * args.burst_s)))
        burst = [next(traffic) for _ in range(size)]
        pool_stats(pool_url, reset=True)
        before = probe(ports, r, pool_url)
        jobs = submit(client, burst)
        outcome = finish(client, jobs, timeout=1800)
        after = probe(ports, r, pool_url)
        figures = measured(before, after, len(burst), outcome["facts"])
        wall = figures["wall_s"]
        figures |= {
            "sessions_per_s": round(outcome["done"] / wall, 3),
            "facts_per_s": round(figures["facts"] / wall, 1),
            "submit_to_done": outcome,
            "bottleneck": bottleneck(figures),
        }
        rate = args.steady_share * figures["sessions_per_s"]
        steady: dict[str, Any] = {"arrival_per_s": round(rate, 3)}
        if rate > 0:
            count = max(4, round(rate * args.steady_s))
            items = [next(traffic) for _ in range(count)]
            before = probe(ports, r, pool_url)
            started, jobs = time.monotonic(), []
            for i, item in enumerate(items):
                time.sleep(max(0.0, started + i / rate - time.monotonic()))
                jobs += submit(client, [item])
            outcome = finish(client, jobs, timeout=1800)
            after = probe(ports, r, pool_url)
            steady |= measured(before, after, len(items), outcome["facts"])
            steady["submit_to_done"] = outcome
            steady["bottleneck"] = bottleneck(steady)
        return {
            "n": n,
            "latency_s": latency_s,
            "pool": pool_kind,
            "burst": figures,
            "steady": steady,
        }
    finally:
        worker.stop()


# --- the run ----------------------------------------------------------------------------------


def plot(result: dict[str, Any], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for key, rows in result["by_latency"].items():
        latency, _, kind = key.partition(" ")
        ns = [row["n"] for row in rows]
        rate = [row["burst"]["facts_per_s"] for row in rows]
        (line,) = ax.plot(
            ns, rate, marker="o", label=f"measured, model {latency} s a call {kind}".strip()
        )
        ideal = [rate[0] * n / ns[0] for n in ns]
        ax.plot(
            ns, ideal, linestyle="--", color=line.get_color(), alpha=0.6, label="ideal (linear)"
        )
    floor = result["embedding_only_facts_per_s"]
    ax.axhline(0.6 * floor, color="grey", linestyle=":", label="0.6 × embedding-only rate")
    ax.set_xscale("log", base=2)
    ax.set_xticks(result["slots"], [str(n) for n in result["slots"]])
    ax.set_xlabel("extract slots N")
    ax.set_ylabel("facts committed per second (burst)")
    ax.set_title("Ingest against extract slots (stand-in model pool)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def compare(result: dict[str, Any]) -> None:
    """Each point against the smallest N of its latency (the linear share, in sessions per
    second and per extract slot) and against the embedding-only floor; a pool whose slots
    are busy because each of its tasks got slower, on a machine whose CPUs are busy, is
    held back by the machine, not by its slots."""
    for rows in result["by_latency"].values():
        first = rows[0]
        per_slot = first["burst"]["sessions_per_s"] / first["n"]
        slot_s = first["burst"]["pools"]["extract"]["busy_s"] / first["burst"]["sessions"]
        for row in rows:
            b = row["burst"]
            b["share_of_linear"] = round(b["sessions_per_s"] / (per_slot * row["n"]), 3)
            b["vs_embedding_only"] = round(
                b["facts_per_s"] / result["embedding_only_facts_per_s"], 3
            )
            b["extract_slot_s_per_session"] = round(
                b["pools"]["extract"]["busy_s"] / b["sessions"], 2
            )
            slower = b["extract_slot_s_per_session"] / slot_s
            cpu = b["host_cpu_busy"] or 0.0
            if slower >= 1.25 and cpu >= 0.75:
                b["bottleneck"] = (
                    f"the machine's CPUs ({cpu:.0%} busy): an extract slot took {slower:.1f}× "
                    f"its time a session at N={first['n']}"
                )


def table(result: dict[str, Any]) -> str:
    """The results as the markdown table bench/README.md shows."""
    head = (
        "| model latency | N | sessions/s | facts/s | × linear (sessions/s) | × embedding-only | "
        "steady: submit-to-done p50 / p95 | queue wait p50 extract / memory | "
        "model calls in flight | extract / memory pool busy | bottleneck |"
    )
    lines = [head, "|" + "---|" * 11]
    for key, rows in result["by_latency"].items():
        latency, _, kind = key.partition(" ")
        for row in rows:
            b, st = row["burst"], row["steady"]
            done = st.get("submit_to_done", {})
            wait = b["queue_wait"]
            lines.append(
                f"| {latency} s {kind}".rstrip()
                + f" | {row['n']} | {b['sessions_per_s']} | {b['facts_per_s']} | "
                f"{b['share_of_linear']} | {b['vs_embedding_only']} | "
                f"{done.get('p50_s')} s / {done.get('p95_s')} s | "
                f"{wait.get('extract', {}).get('p50_ms')} / "
                f"{wait.get('memory', {}).get('p50_ms')} ms | {b['model']['mean_in_flight']} | "
                f"{b['pools']['extract']['utilisation']} / {b['pools']['memory']['utilisation']} | "
                f"{b['bottleneck']} |"
            )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="PATH holding locomo/")
    parser.add_argument("--out", type=Path, required=True, help="a directory")
    parser.add_argument("--slots", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    parser.add_argument("--latency-s", type=float, nargs="+", default=[1.0, 0.2])
    parser.add_argument(
        "--pool",
        choices=["threads", "prefork"],
        nargs="+",
        default=["threads"],
        help="the extract worker's pool; two: both in this run, side by side",
    )
    parser.add_argument("--memory-slots", type=int, default=4)
    parser.add_argument("--model-concurrency", type=int, default=256, help="the stand-in's")
    parser.add_argument("--burst-s", type=float, default=40.0)
    parser.add_argument("--min-burst", type=int, default=12)
    parser.add_argument("--max-burst", type=int, default=150)
    parser.add_argument("--steady-s", type=float, default=30.0)
    parser.add_argument("--steady-share", type=float, default=0.7)
    parser.add_argument("--name", default="scale_out", help="the results file's stem")
    args = parser.parse_args()
    data = args.data / "locomo" if (args.data / "locomo").is_dir() else args.data
    workload = load_workload(data)
    result: dict[str, Any] = {
        "command": "python -m bench.scale_out " + " ".join(sys.argv[1:]),
        "stand_in": "extraction answered by bench/model_pool.py (pre-extracted facts after a "
        "configured latency), not a model; general role `rules`",
        "machine": {"cpus": os.cpu_count()},
        "conversations": list(workload.conversations),
        "tenants": list(TENANTS),
        "slots": args.slots,
        "pool": args.pool,
        "memory_slots": args.memory_slots,
        "embedding_only_facts_per_s": round(embedding_only_rate(fact_texts(data)), 1),
        "by_latency": {},
    }
    print(f"embedding only: {result['embedding_only_facts_per_s']} facts/s", flush=True)
    work = Path(tempfile.mkdtemp(prefix="scale-out-"))
    with private_redis(work) as url:
        client, coord = producer(url)
        r = redis.Redis.from_url(url)
        memory_port = free_port()
        for latency in args.latency_s:
            with stand_in(data / "atommem_facts", latency, args.model_concurrency, work) as pool:
                env = dict(
                    os.environ,
                    ATOMMEM_BROKER__URL=url,
                    ATOMMEM_STORE__QDRANT_PATH=str(work / "qdrant"),
                    ATOMMEM_LLM__EXTRACTOR_BACKEND="openai",
                    ATOMMEM_LLM__GENERAL_BACKEND="rules",
                    ATOMMEM_LLM__EXTRACTOR__BASE_URL=pool,
                    ATOMMEM_LLM__EXTRACTOR__MODEL="fact-executor",
                    ATOMMEM_LOG__FORMAT="text",
                )
                memory = WorkerProcess(
                    env | {"ATOMMEM_METRICS__PORT": str(memory_port)},
                    work / f"memory-{latency:g}.log",
                    MEMORY_QUEUES,
                    args.memory_slots,
                    "memory",
                )
                try:
                    memory.wait_ready(180)
                    for kind in args.pool:
                        rows = []
                        for n in args.slots:
                            row = operating_point(
                                n, latency, kind, args, workload, env, work, client, r,
                                memory_port, pool,
                            )  # fmt: skip
                            rows.append(row)
                            b = row["burst"]
                            print(
                                f"latency {latency:g} s, {kind} N={n}: {b['sessions_per_s']} "
                                f"sessions/s, {b['facts_per_s']} facts/s; {b['bottleneck']}",
                                flush=True,
                            )
                        key = f"{latency:g}" if len(args.pool) == 1 else f"{latency:g} {kind}"
                        result["by_latency"][key] = rows
                finally:
                    memory.stop()
        coord.close()
    compare(result)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"{args.name}.json"
    path.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    plot(result, args.out / f"{args.name}.png")
    (args.out / f"{args.name}.md").write_text(table(result), encoding="utf-8")
    print(table(result))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
