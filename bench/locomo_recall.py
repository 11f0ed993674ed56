"""LoCoMo Recall@k by category for the recall ablations, and query latency through the
query worker.

    atommem --data-dir /tmp/loco ingest --create-space ../shared/data/locomo/atommem_facts/
    python bench/locomo_recall.py --data-dir /tmp/loco \\
        --conversations ../shared/data/locomo/conversations --out bench/results/locomo_recall.json

Recall@k (DESIGN §8): the share of a question's evidence dia_ids covered by the source turns
of the first k facts, averaged over the questions of categories 1-4. Evidence strings are
taken as they are, malformed ones included, so figures stay comparable with the reference.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

from common.retrieval.search import search
from common.settings import get_settings
from workers import runtime

CATEGORIES = {4: "single_hop", 1: "multi_hop", 2: "temporal", 3: "open_domain"}
MODES = ("flat", "no-graph", "full")


def recall_at_k(evidence: list[str], retrieved_turns: list[list[str]], k: int) -> float:
    """|evidence ∩ turns of the first k facts| / |evidence|."""
    wanted = set(evidence)
    if not wanted:
        return 0.0
    covered: set[str] = set()
    for turns in retrieved_turns[:k]:
        covered.update(turns)
    return len(wanted & covered) / len(wanted)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--conversations", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--k", type=int, default=10)
    args = parser.parse_args()

    settings = get_settings()
    settings = settings.model_copy(
        update={
            "store": settings.store.model_copy(update={"qdrant_path": args.data_dir / "qdrant"}),
            "pipeline": settings.pipeline.model_copy(
                update={"coordination_path": args.data_dir / "coordination.sqlite"}
            ),
        }
    )
    runtime.configure(settings)
    ctx = runtime.context()
    questions = []
    for path in sorted(args.conversations.glob("*.json")):
        doc = json.loads(path.read_text(encoding="utf-8"))
        for i, qa in enumerate(doc["qa"]):
            if qa.get("category") in CATEGORIES:
                questions.append((path.stem, i, qa))

    sums: dict[str, dict[str, float]] = {m: {c: 0.0 for c in CATEGORIES.values()} for m in MODES}
    counts = {c: 0 for c in CATEGORIES.values()}
    for space, _, qa in questions:
        counts[CATEGORIES[qa["category"]]] += 1
    for mode in MODES:
        for space, _, qa in questions:
            result = search(ctx, "default", space, qa["question"], k=args.k, mode=mode)  # type: ignore[arg-type]
            turns = [h.fact.all_turn_ids() for h in result.hits]
            sums[mode][CATEGORIES[qa["category"]]] += recall_at_k(
                [str(e) for e in qa.get("evidence", [])], turns, args.k
            )
    summary = {
        mode: {
            **{c: round(100 * sums[mode][c] / counts[c], 2) for c in CATEGORIES.values()},
            "overall": round(100 * sum(sums[mode].values()) / sum(counts.values()), 2),
        }
        for mode in MODES
    }

    # Latency through the query worker (embedded: the same task, in-process broker).
    from workers.celery_app import app
    from workers.client import MemoryClient
    from workers.embedded import EmbeddedWorker

    worker = EmbeddedWorker()
    worker.start()
    client = MemoryClient(app, runtime.coordinator())
    for space, _, qa in questions[:20]:
        client.search("default", space, qa["question"])  # warm every space index
    end_to_end: list[float] = []
    stages: dict[str, list[float]] = {}
    for space, _, qa in questions:
        started = time.perf_counter()
        response = client.search("default", space, qa["question"])
        end_to_end.append((time.perf_counter() - started) * 1000)
        for name, ms in response["timings_ms"].items():
            stages.setdefault(name, []).append(ms)
    worker.stop()
    latency = {
        name: {
            "p50": round(statistics.median(v), 2),
            "p95": round(percentile(v, 0.95), 2),
            "max": round(max(v), 2),
        }
        for name, v in {"through_query_worker": end_to_end, **stages}.items()
    }
    result: dict[str, Any] = {
        "command": f"python bench/locomo_recall.py --data-dir {args.data_dir} "
        f"--conversations {args.conversations} --out {args.out}",
        "k": args.k,
        "questions": counts,
        "recall_at_k": summary,
        "latency_ms_full": latency,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
