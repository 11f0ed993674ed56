"""`python -m bench.first_pass`: where a space's top k by S_h gains from the bfloat16 first
pass (`common/store/bfloat16_rows.py`), and whether its top k stays the exact one.

For each size, one kind index of N synthetic rows (384-d unit vectors drawn at random,
keywords from a vocabulary of 3,000 words, two speakers), built as a space index is, with its
bfloat16 copy made whatever the size. Timed per question, alternately with and without the
copy: `KindIndex.hybrid` over every row for the top k (what primary recall does), and the
float32 scan alone (`matrix @ vector`) beside it. Also counted: the rows the first pass
keeps for the exact rerank, and the questions whose top k differs from the exact one (ids
and order; rows whose scores tie to float32's last place may trade places). Random
vectors are spread more evenly than a model's, so the rows kept are a rough guide only; the
model's own are in `bench scale`. Results go to `bench/results/first_pass.json`.

With `--drafts B ...` it times instead what a commit's batch of B drafts costs against each
size: the drafts primed (`KindIndex.prime`) and each ranked for its top k by S_h over every
row, as event routing ranks its candidates, through one bfloat16 product of the batch and
without the copy (one float32 product of the batch), which goes first alternating, with the
top-k lists that differ between the two.

With `--data-dir D --space S` it runs instead on a space a `bench scale` run left in D (the
model's embeddings, events and profiles): `bench scale`'s synthetic questions, each answered
by `full` recall in this process with the first pass and without it (which goes first
alternating), with the stages' p50 of each and the questions whose top 10 differs.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.metrics import percentiles
from common.settings import SimilaritySettings
from common.similarity import TextQuery
from common.store import bfloat16_rows
from common.store.bfloat16_rows import BFloat16Rows
from common.store.space_index import KindIndex

DIM = 384
WORDS = [f"word{i}" for i in range(3000)]
SPEAKERS = (["Ann"], ["Ben"])


class _Row:
    def __init__(self, people: list[str]) -> None:
        self.participants = people


def _people(row: _Row) -> list[str]:
    return row.participants


def build(n: int, rng: np.random.Generator) -> KindIndex[Any]:
    index: KindIndex[Any] = KindIndex(DIM, _people)
    matrix = rng.standard_normal((n, DIM)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    for i, vector in enumerate(matrix):
        words = [str(w) for w in rng.choice(WORDS, size=4, replace=False)]
        index.upsert(f"r{i}", _Row(SPEAKERS[i % 2]), vector, words, " ".join(words))
    if index._bf16 is None:  # below MIN_ROWS: made here, to time what it would gain
        index._bf16 = BFloat16Rows(index.matrix, index.matrix.shape[0])
    return index


def run_size(n: int, questions: int, k: int, seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    index = build(n, rng)
    weights = SimilaritySettings()
    mask = index.mask()
    copy = index._bf16
    times: dict[str, list[float]] = {"first_pass": [], "float32": [], "scan": []}
    kept: list[int] = []
    differ = 0
    for _ in range(questions):
        vector = rng.standard_normal(DIM).astype(np.float32)
        vector /= np.linalg.norm(vector)
        query = TextQuery.of(" ".join(str(w) for w in rng.choice(WORDS, size=3)))
        index.lexical(query, weights)  # kept for the question, as search does first
        tops = {}
        arms = [("first_pass", copy), ("float32", None)]
        for name, with_copy in arms if len(kept) % 2 == 0 else arms[::-1]:  # which goes first
            index._bf16 = with_copy
            began = time.perf_counter()
            found = index.hybrid(vector, query, weights, mask, k=k)
            times[name].append((time.perf_counter() - began) * 1000)
            tops[name] = [s.id for s in found]
        index._bf16 = copy
        began = time.perf_counter()
        _ = index.matrix @ vector
        times["scan"].append((time.perf_counter() - began) * 1000)
        rows = index._ruled_in(vector, np.arange(n), index.lexical(query, weights), weights, k)
        kept.append(n if rows is None else int(rows.size))
        differ += tops["first_pass"] != tops["float32"]
    return {
        "rows": n,
        "k": k,
        "questions": questions,
        "top_k_ms": {name: percentiles(values) for name, values in times.items()},
        "speedup_p50": round(
            percentiles(times["float32"])["p50"] / percentiles(times["first_pass"])["p50"], 2
        ),
        "rows_kept": percentiles([float(x) for x in kept]),
        "top_k_differs": differ,
    }


def run_drafts(n: int, batches: list[int], rounds: int, k: int, seed: int) -> list[dict[str, Any]]:
    """Per batch size: a commit's batch primed and each draft's top k, with the first pass
    (one bfloat16 product of the batch) and without it (one float32 product)."""
    rng = np.random.default_rng(seed)
    index = build(n, rng)
    weights = SimilaritySettings()
    mask = index.mask()
    copy = index._bf16
    out = []
    for size in batches:
        times: dict[str, list[float]] = {"first_pass": [], "float32": []}
        differ = 0
        for r in range(rounds):
            drafts = rng.standard_normal((size, DIM)).astype(np.float32)
            drafts /= np.linalg.norm(drafts, axis=1, keepdims=True)
            queries = [TextQuery.of(" ".join(rng.choice(WORDS, size=4))) for _ in range(size)]
            tops: dict[str, list[list[str]]] = {}
            arms = [("first_pass", copy), ("float32", None)]
            for name, with_copy in arms if r % 2 == 0 else arms[::-1]:
                index._bf16 = with_copy
                index._lexical_memo = None  # neither arm reads the other's lexical scores
                began = time.perf_counter()
                index.prime(drafts)
                try:
                    tops[name] = [
                        [s.id for s in index.hybrid(d, q, weights, mask, k=k)]
                        for d, q in zip(drafts, queries, strict=True)
                    ]
                finally:
                    index.unprime()
                times[name].append((time.perf_counter() - began) * 1000)
            index._bf16 = copy
            differ += sum(a != b for a, b in zip(tops["first_pass"], tops["float32"], strict=True))
        out.append(
            {
                "rows": n,
                "drafts": size,
                "k": k,
                "rounds": rounds,
                "batch_ms": {name: percentiles(values) for name, values in times.items()},
                "speedup_p50": round(
                    percentiles(times["float32"])["p50"] / percentiles(times["first_pass"])["p50"],
                    2,
                ),
                "top_k_lists_differing": differ,
            }
        )
    return out


def run_space(data: Path, tenant: str, space: str, questions: int, seed: int) -> dict[str, Any]:
    """`full` recall on a stored space, each question with the first pass and without."""
    from bench.scale import synthetic_questions
    from common.retrieval.search import search
    from common.settings import Settings
    from workers import runtime

    settings = Settings().in_data_dir(data)
    runtime.configure(settings)
    ctx = runtime.context()
    try:
        index = ctx.index(tenant, space)
        copy = index.facts._bf16
        if copy is None:
            raise SystemExit(f"{space}: {len(index.facts)} facts, no bfloat16 copy kept")
        asked = synthetic_questions(questions + 10, seed)
        for question in asked[:10]:  # the model, the graph's channels, the caches: warm
            search(ctx, tenant, space, question, mode="full")
        stages: dict[str, dict[str, list[float]]] = {"first_pass": {}, "float32": {}}
        differ = 0
        arms = [("first_pass", copy), ("float32", None)]
        for i, question in enumerate(asked[10:]):
            tops = {}
            # which goes first alternates: the second reads the lexical scores the first kept
            for name, with_copy in arms if i % 2 == 0 else arms[::-1]:
                index.facts._bf16 = with_copy
                result = search(ctx, tenant, space, question, mode="full")
                tops[name] = [h.fact.id for h in result.hits]
                for stage, ms in result.timings_ms.items():
                    stages[name].setdefault(stage, []).append(ms)
            index.facts._bf16 = copy
            differ += tops["first_pass"] != tops["float32"]
        return {
            "space": space,
            "facts": len(index.facts),
            "events": len(index.events),
            "questions": questions,
            "stage_p50_ms": {
                name: {stage: percentiles(v)["p50"] for stage, v in by_stage.items()}
                for name, by_stage in stages.items()
            },
            "top_10_differs": differ,
        }
    finally:
        runtime.reset()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[5000, 10000, 20000, 50000, 100000])
    parser.add_argument("--questions", type=int, default=100)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, default=Path("bench/results/first_pass.json"))
    parser.add_argument("--data-dir", type=Path, help="a `bench scale` run's data directory")
    parser.add_argument("--space", help="with --data-dir: the space to ask (e.g. scale-100000)")
    parser.add_argument("--tenant", default="default")
    parser.add_argument(
        "--drafts", type=int, nargs="+", help="time commits' batches of these sizes instead"
    )
    parser.add_argument("--rounds", type=int, default=10, help="with --drafts: batches a size")
    parser.add_argument(
        "--torch-threads", type=int, help="PyTorch's threads (default: its own, one a core)"
    )
    args = parser.parse_args(argv)
    torch = bfloat16_rows.wait_for_torch()
    if torch is None:
        parser.error("PyTorch is not installed: the first pass never runs")
    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1, user_api="blas")  # as a worker runs it (workers/wiring.py)
    if args.data_dir is not None:
        if not args.space:
            parser.error("--data-dir needs --space")
        found = run_space(args.data_dir, args.tenant, args.space, args.questions, args.seed)
        found["torch_threads"] = torch.get_num_threads()
        print(json.dumps(found), flush=True)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(found, indent=2) + "\n", encoding="utf-8")
        return 0
    rows = []
    if args.drafts:
        for n in args.sizes:
            for row in run_drafts(n, args.drafts, args.rounds, args.k, args.seed):
                row["torch_threads"] = torch.get_num_threads()
                rows.append(row)
                print(json.dumps(row), flush=True)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        result: dict[str, Any] = {"benchmark": "first_pass_drafts", "batches": rows}
        args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        return 0
    for n in args.sizes:
        row = run_size(n, args.questions, args.k, args.seed)
        row["torch_threads"] = torch.get_num_threads()
        rows.append(row)
        print(json.dumps(row), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    result = {"benchmark": "first_pass", "min_rows": bfloat16_rows.MIN_ROWS, "sizes": rows}
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
