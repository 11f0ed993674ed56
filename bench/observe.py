"""What the benchmarks read while they run: a worker's Prometheus metrics, CPU seconds of a
process and of the machine, a free port, and the embedding-only floor."""

from __future__ import annotations

import math
import os
import socket
import time
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from common.embeddings import Embedder
from common.settings import EmbeddingSettings

TICK = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(port: int) -> Samples:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def total(samples: Samples, name: str, **labels: str) -> float:
    """The sum of a metric's samples whose labels include `labels`."""
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and want <= set(ls))


def delta(after: Samples, before: Samples, name: str, **labels: str) -> float:
    return total(after, name, **labels) - total(before, name, **labels)


def bucket_quantile(after: Samples, before: Samples, name: str, q: float, **labels: str) -> float:
    """A quantile of a histogram's observations between two scrapes (linear in a bucket)."""
    want = set(labels.items())
    edges: dict[float, float] = {}
    for (n, ls), v in after.items():
        if n != f"{name}_bucket" or not want <= set(ls):
            continue
        le = float(dict(ls)["le"])
        edges[le] = edges.get(le, 0.0) + v - before.get((n, ls), 0.0)
    if not edges:
        return math.nan
    bounds = sorted(edges)
    count = edges[bounds[-1]]
    if count <= 0:
        return math.nan
    rank, lower, seen = q * count, 0.0, 0.0
    for le in bounds:
        if edges[le] >= rank:
            if math.isinf(le):
                return lower
            inside = edges[le] - seen
            return lower + (le - lower) * ((rank - seen) / inside if inside else 0.0)
        lower, seen = le, edges[le]
    return lower


def host_cpu() -> tuple[float, float]:
    """(busy, total) jiffies of the whole machine, from /proc/stat."""
    fields = [float(x) for x in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


def embedding_only_rate(texts: list[str]) -> float:
    return embedding_only(texts)[0]


def embedding_only(texts: list[str]) -> tuple[float, float]:
    """Facts per second and CPU seconds of embedding `texts` in one call (the floor)."""
    embedder = Embedder(EmbeddingSettings())
    embedder.encode(texts[:64])
    cpu, started = own_cpu(), time.perf_counter()
    embedder.encode(texts)
    return len(texts) / (time.perf_counter() - started), own_cpu() - cpu


def own_cpu() -> float:
    """This process's user and system CPU seconds."""
    t = os.times()
    return t.user + t.system


def process_cpu(pid: int) -> float:
    """User and system CPU seconds of a process, its threads and its waited-for children."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / TICK
