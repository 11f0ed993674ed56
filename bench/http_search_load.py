"""Search latency over HTTP under a bounded concurrent load.

    python -m bench.http_search_load --url http://127.0.0.1:8080 --key amk_... \
        --space conv-26 --questions ../shared/data/locomo/conversations/conv-26.json \
        --concurrency 8 --requests 400 --out bench/results/http_search.json

Questions are a LoCoMo file's `qa` (categories 1-4), cycled in order. `--concurrency`
requests are in flight at any time (an asyncio semaphore over one httpx.AsyncClient with
as many connections); each latency is the wall time of one POST /v1/spaces/{space}/search
from send to the parsed JSON reply. A warm-up of `--concurrency` requests is not counted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from pathlib import Path

import httpx


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def run(args: argparse.Namespace) -> dict[str, object]:
    qa = json.loads(Path(args.questions).read_text())["qa"]
    questions = [q["question"] for q in qa if q.get("category") in (1, 2, 3, 4)]
    limits = httpx.Limits(max_connections=args.concurrency)
    headers = {"Authorization": f"Bearer {args.key}"}
    gate = asyncio.Semaphore(args.concurrency)
    latencies: list[float] = []
    errors: dict[int, int] = {}
    async with httpx.AsyncClient(
        base_url=args.url, headers=headers, limits=limits, timeout=120
    ) as http:

        async def one(question: str, record: bool) -> None:
            async with gate:
                started = time.perf_counter()
                response = await http.post(
                    f"/v1/spaces/{args.space}/search", json={"question": question}
                )
                response.json()
                elapsed = (time.perf_counter() - started) * 1000
            if response.status_code != 200:
                errors[response.status_code] = errors.get(response.status_code, 0) + 1
            elif record:
                latencies.append(elapsed)

        await asyncio.gather(*(one(q, False) for q in questions[: args.concurrency]))
        started = time.perf_counter()
        await asyncio.gather(
            *(one(questions[i % len(questions)], True) for i in range(args.requests))
        )
        wall = time.perf_counter() - started
    return {
        "tool": "bench/http_search_load.py (httpx.AsyncClient, asyncio semaphore)",
        "space": args.space,
        "concurrency": args.concurrency,
        "requests": args.requests,
        "ok": len(latencies),
        "errors": errors,
        "latency_ms": {
            "p50": round(percentile(latencies, 0.50), 1),
            "p95": round(percentile(latencies, 0.95), 1),
            "max": round(max(latencies), 1),
            "mean": round(statistics.fmean(latencies), 1),
        },
        "throughput_rps": round(len(latencies) / wall, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--space", required=True)
    parser.add_argument("--questions", required=True, help="a LoCoMo conversation file")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--note", default="", help="where it ran (workers, machine)")
    parser.add_argument("--out")
    args = parser.parse_args()
    result = asyncio.run(run(args))
    result["note"] = args.note
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
