"""Questions from several clients at once: search latency through a real worker as the
number of clients asking at the same time grows, with the query slots off and on.

    python -m bench.query_clients --data ../shared/data/locomo --out /tmp/query_clients.json

For each `--query-concurrency` setting: a fresh private `redis-server` (bench.fairness) and a
real `celery worker` consuming every queue (`-P threads -c --concurrency`, the embedded
store), a space holding the first `--sessions` sessions of `--conversation` (the authors'
pre-extracted facts). Then, for each `--clients` count, that many threads share one producer
(as the HTTP API's waiting pool does) and each asks `--questions` of the conversation's
questions back to back. Latency is each question's round trip as the client sees it.
Nothing else runs on the worker meanwhile.
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

from bench.fairness import QUEUES, private_redis, producer, questions
from bench.metrics import percentiles
from common.inputs.formats import read_sessions
from common.settings import StoreSettings
from common.store import records
from common.store.backends import open_store
from workers.launch import WorkerProcess

TENANT, SPACE = "bench", "asked"


def ask_together(client: Any, asks: list[str], clients: int, each: int) -> list[float]:
    """`clients` threads, each asking `each` questions back to back; every latency, in ms."""
    latencies: list[float] = []
    failed: list[BaseException] = []
    lock = threading.Lock()

    def run(offset: int) -> None:
        try:
            for i in range(each):
                question = asks[(offset * each + i) % len(asks)]
                began = time.perf_counter()
                client.search(TENANT, SPACE, question, timeout=120)
                with lock:
                    latencies.append((time.perf_counter() - began) * 1000)
        except BaseException as exc:  # raised again below: no figure from a failed client
            failed.append(exc)

    threads = [threading.Thread(target=run, args=(c,)) for c in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failed:
        raise failed[0]
    return latencies


def run_setting(args: argparse.Namespace, slots: int, work: Path) -> dict[str, Any]:
    data = Path(tempfile.mkdtemp(prefix=f"slots{slots}-", dir=work))
    facts = args.data / "atommem_facts" / f"{args.conversation}.json"
    asks = questions(args.data / "conversations", args.conversation)
    store = open_store(StoreSettings(qdrant_path=data / "qdrant"), 384)
    records.create_space(store, TENANT, SPACE)
    store.close()
    with private_redis(data) as url:
        env = dict(
            os.environ,
            ATOMMEM_BROKER__URL=url,
            ATOMMEM_STORE__QDRANT_PATH=str(data / "qdrant"),
            ATOMMEM_BROKER__QUERY_CONCURRENCY=str(slots),
        )
        worker = WorkerProcess(env, data / "worker.log", QUEUES, args.concurrency, name="all")
        try:
            worker.wait_ready()
            client, _ = producer(url)
            jobs = client.submit(TENANT, SPACE, read_sessions(facts).sessions[: args.sessions])
            done = client.wait(TENANT, [j.job_id for j in jobs], timeout=900)
            if any(j.state != "done" for j in done):
                raise SystemExit(f"the space's ingest failed: {[j.reason for j in done]}")
            ask_together(client, asks, 1, 5)  # the model, the space index, every code path
            rows = []
            for clients in args.clients:
                latencies = ask_together(client, asks, clients, args.questions)
                rows.append({"clients": clients, "latency_ms": percentiles(latencies)})
                print(f"query slots {slots}, {clients} clients: {rows[-1]['latency_ms']}")
        finally:
            worker.stop()
    return {"query_concurrency": slots, "runs": rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--data", type=Path, required=True, help="the LoCoMo directory")
    parser.add_argument("--conversation", default="conv-26")
    parser.add_argument("--sessions", type=int, default=10)
    parser.add_argument("--concurrency", type=int, default=2, help="the worker's -c")
    parser.add_argument("--query-concurrency", type=int, nargs="+", default=[0, 2])
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--questions", type=int, default=20, help="per client")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="query-clients-") as work:
        settings = [run_setting(args, slots, Path(work)) for slots in args.query_concurrency]
    doc = {
        "benchmark": "query_clients",
        "command": "python -m bench.query_clients " + " ".join(argv or []),
        "machine": {"cpus": os.cpu_count()},
        "conversation": args.conversation,
        "sessions": args.sessions,
        "worker_concurrency": args.concurrency,
        "questions_per_client": args.questions,
        "settings": settings,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
