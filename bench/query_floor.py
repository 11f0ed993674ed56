"""`python -m bench.query_floor`: how far one query's latency sits above its floor, the
encoding of the question alone.

In one process and one run: the question encoded straight through the embedder (the floor),
the same encoding as the recall stage timed it, recall called in this thread as the query
task calls it, and the full round trip through the embedded worker; p50s and differences.
Also in the task: recall with the paper's keyword Jaccard in place of BM25 (the same memory),
so the lexical channel's cost shows as a difference within the run, beside its own stage;
and recall with the question's embedding as it is (`retrieval.nameless_weight=0`), so the
cost of the question vector's projection away from the named participants (their vectors
cached since the warm-up) shows the same way. And the graph stage's own time in the task,
and the embedded ingest of the conversation against its floor: the embedding model alone over
the same fact texts in the ingest's batches, right after it in the same process.
"""

from __future__ import annotations

import argparse
import functools
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.ingest import embedded_batches, embedding_only, ingest_jobs
from bench.locomo import load_conversations
from common.retrieval.search import search
from common.store import records
from workers import runtime

DATA = Path("/work/shared/data/locomo")


def _p50(values: list[float]) -> float:
    return round(statistics.median(values), 2)


def _timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return (time.perf_counter() - started) * 1000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--conversation", default=str(DATA / "conversations" / "conv-26.json"))
    parser.add_argument("--facts", default=str(DATA / "atommem_facts"))
    parser.add_argument("--questions", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--mode", default="full")
    parser.add_argument("--out", default="bench/results/query_floor.json")
    args = parser.parse_args(argv)

    from common.producer import Producer
    from common.settings import get_settings
    from workers.celery_app import app
    from workers.embedded import EmbeddedWorker

    root = Path(tempfile.mkdtemp(prefix="atommem-floor-"))
    worker: EmbeddedWorker | None = None
    try:
        settings = get_settings().in_data_dir(root)
        runtime.configure(settings)
        (conv,) = load_conversations(Path(args.conversation), Path(args.facts))
        ctx = runtime.context()
        embedder = ctx.embedder
        embedder.encode(["warm up"])
        worker = EmbeddedWorker()  # what `atommem` runs with no broker: the in-process worker
        worker.start()
        coord = runtime.coordination()
        client = Producer(app, coord.jobs, coord.sequence)
        tenant = settings.tenant
        records.create_space(ctx.store, tenant, conv.name)
        items = [(conv.name, s) for s in conv.sessions.sessions]
        seconds, totals = ingest_jobs(client, tenant, items, "ingest", True)
        batches = embedded_batches(ctx, items)
        floor = embedding_only(embedder.encode, batches) if batches else None
        questions = [qa["question"] for _, qa in conv.questions[: args.questions]]
        for q in questions[:5]:  # warm the worker, the space index and every code path
            client.search(tenant, conv.name, q, mode=args.mode)
            search(ctx, tenant, conv.name, q, mode=args.mode)

        own = ctx.settings
        jaccard = own.model_copy(
            update={"similarity": own.similarity.model_copy(update={"lexical": "jaccard"})}
        )
        plain = own.model_copy(
            update={"retrieval": own.retrieval.model_copy(update={"nameless_weight": 0.0})}
        )
        alternates = {"in_task_jaccard": jaccard, "in_task_plain_question": plain}
        samples: dict[str, list[float]] = {}
        for _ in range(args.rounds):  # interleaved, so drift on a shared machine hits all alike
            for q in questions:
                samples.setdefault("encode_alone", []).append(
                    _timed(functools.partial(embedder.encode, [q]))
                )
                started = time.perf_counter()
                result = search(ctx, tenant, conv.name, q, mode=args.mode)
                samples.setdefault("in_task", []).append((time.perf_counter() - started) * 1000)
                samples.setdefault("encode_in_task", []).append(result.timings_ms["embedding"])
                samples.setdefault("lexical_in_task", []).append(result.timings_ms["lexical"])
                samples.setdefault("graph_in_task", []).append(result.timings_ms.get("graph", 0.0))
                for name, alternate in alternates.items():
                    ctx.settings = alternate  # the worker is idle: nothing else reads it now
                    try:
                        started = time.perf_counter()
                        other = search(ctx, tenant, conv.name, q, mode=args.mode)
                        samples.setdefault(name, []).append((time.perf_counter() - started) * 1000)
                        samples.setdefault(f"encode_{name}", []).append(
                            other.timings_ms["embedding"]
                        )
                    finally:
                        ctx.settings = own
                started = time.perf_counter()
                reply = client.search(tenant, conv.name, q, mode=args.mode)
                samples.setdefault("through_worker", []).append(
                    (time.perf_counter() - started) * 1000
                )
                samples.setdefault("encode_in_worker", []).append(reply.timings_ms["embedding"])
                samples.setdefault("recall_in_worker", []).append(reply.timings_ms["total"])
        p50 = {name: _p50(values) for name, values in samples.items()}
        doc = {
            "benchmark": "query_floor",
            "command": " ".join(["python -m bench.query_floor", *sys.argv[1:]]),
            "conversation": conv.name,
            "ingest_s": round(seconds, 2),
            # the embedded ingest's rate against the model alone over the same texts, in
            # the same process right after it (bench/ingest.py)
            "ingest": {
                "facts_in": totals.facts_in,
                **(floor.as_fields(totals.facts_in, seconds) if floor is not None else {}),
            },
            "mode": args.mode,
            "questions": len(questions),
            "samples_each": len(samples["in_task"]),
            "p50_ms": p50,
            "over_floor_ms": {
                "encode_in_task": round(p50["encode_in_task"] - p50["encode_alone"], 2),
                "encode_in_worker": round(p50["encode_in_worker"] - p50["encode_alone"], 2),
                "in_task": round(p50["in_task"] - p50["encode_alone"], 2),
                "through_worker": round(p50["through_worker"] - p50["encode_alone"], 2),
            },
            "hop_ms": round(p50["through_worker"] - p50["recall_in_worker"], 2),
            "bm25_over_jaccard_in_task_ms": round(p50["in_task"] - p50["in_task_jaccard"], 2),
            "nameless_over_plain_question_in_task_ms": round(
                p50["in_task"] - p50["in_task_plain_question"], 2
            ),
            "nameless_over_plain_question_encode_ms": round(
                p50["encode_in_task"] - p50["encode_in_task_plain_question"], 2
            ),
        }
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
        print(json.dumps(doc, indent=1))
    finally:
        if worker is not None:
            worker.stop()
        runtime.reset()
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
