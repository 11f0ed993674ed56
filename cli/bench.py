"""`atommem bench`: LoCoMo recall, LongMemEval retrieval, synthetic scale and the report,
driven through the production task graph; and the extractor's facts against the authors'."""

from __future__ import annotations

import argparse
import atexit
import json
import shlex
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import extract_quality, locomo, longmemeval, scale
from bench.report import write_report
from cli.context import context, producer, setup, store_reachable
from common.context import MemoryContext
from common.errors import InvalidInput
from common.producer import Producer
from common.settings import get_settings
from workers import runtime


def _bench_setup(args: argparse.Namespace) -> tuple[str, MemoryContext]:
    """Tenant and store for a benchmark: a throwaway data dir unless one is given, the store
    reachable from here (spaces are created and counted), the model loaded before any clock."""
    if not args.data_dir:
        args.data_dir = tempfile.mkdtemp(prefix="atommem-bench-")
        atexit.register(shutil.rmtree, args.data_dir, True)
    tenant = setup(args)
    if not store_reachable():
        raise InvalidInput(
            "the benchmark creates spaces and counts memory, so it needs the store: run it "
            "embedded, or with a Qdrant server URL next to the broker"
        )
    ctx = context()
    ctx.embedder.encode([])
    return tenant, ctx


def cmd_bench_locomo(args: argparse.Namespace) -> int:
    """Build one memory per conversation, ask every question per variant, write the results."""
    variants = locomo.check_variants(args.variant)
    facts = Path(args.facts) if args.facts else None
    conversations = locomo.load_conversations(Path(args.conversations), facts, args.only)
    many = len(variants) > 1
    out = Path(args.out)
    if many and out.suffix == ".json":
        raise InvalidInput("--out names a directory when several variants run")
    if args.reuse and not args.data_dir and get_settings().store.qdrant_url is None:
        raise InvalidInput("--reuse queries spaces built before: pass the --data-dir holding them")
    _check_judge(args)
    tenant, ctx = _bench_setup(args)
    judge = getattr(ctx.backend, "judge", None) if args.judge else None
    settings = runtime.settings()
    ingest_stats = None
    stored_variants = [v for v in variants if v in locomo.STORED_VARIANTS]
    client = producer() if stored_variants else None
    if client is not None:
        if args.reuse:
            ingest_stats = locomo.counts(ctx.store, tenant, conversations, None)
        else:
            ingest_stats = locomo.ingest(client, ctx, tenant, conversations, args.quiet)
            _print_ingest(ingest_stats)
        for conv in conversations[:1]:  # warm the query worker and the space index
            for _, qa in conv.questions[:5]:
                client.search(tenant, conv.name, qa["question"])
    command = "atommem " + shlex.join(sys.argv[1:])
    used = _recall_settings()
    print(f"{'variant':<11} " + " ".join(f"{c:>11}" for c in (*CATEGORY_NAMES, "overall")))
    for variant in variants:
        if variant == "raw-turns":
            rows, stages = locomo.run_raw_turns(
                ctx.embedder.encode, conversations, args.k, args.quiet
            )
            doc = locomo.result_document(variant, args.k, command, rows, stages, None, used)
        elif variant == "hybrid-bm25":
            rows, stages = locomo.run_hybrid_bm25(
                ctx, tenant, conversations, args.k, args.quiet, settings.similarity
            )
            doc = locomo.result_document(variant, args.k, command, rows, stages, ingest_stats, used)
        else:
            rows, stages = locomo.run_memory_variant(
                client, tenant, conversations, variant, args.k, args.answer, args.quiet, judge
            )
            doc = locomo.result_document(variant, args.k, command, rows, stages, ingest_stats, used)
        path = locomo.out_path(out, variant, many)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
        summary = doc["summary"]
        print(
            f"{variant:<11} "
            + " ".join(_cell(summary[c]["recall"]) for c in (*CATEGORY_NAMES, "overall"))
        )
    print(f"results: {out}", file=sys.stderr)
    return 0


CATEGORY_NAMES = ("single_hop", "multi_hop", "temporal", "open_domain")


def _check_judge(args: argparse.Namespace) -> None:
    if args.judge and not args.answer:
        raise InvalidInput("--judge grades answers: add --answer")
    if args.judge and get_settings().llm.general_role == "rules":
        raise InvalidInput(
            "--judge needs a model for the general role (ATOMMEM_LLM__BACKEND=openai, or "
            "ATOMMEM_LLM__GENERAL_BACKEND=openai)"
        )


def _recall_settings() -> dict[str, Any]:
    """The settings a recall figure depends on, for its result file."""
    settings = runtime.settings()
    return {
        "similarity": settings.similarity.model_dump(),
        "retrieval": settings.retrieval.model_dump(),
        "graph": settings.graph.model_dump(),
        "llm_backend": settings.llm.backend_name,
        "embedding_model": str(settings.embedding.model_path),
    }


def _print_ingest(stats: dict[str, Any]) -> None:
    print(
        f"ingest: {stats['facts']} facts, {stats['events']} events, {stats['profiles']} "
        f"profiles in {stats['seconds']} s ({stats['facts_per_s']} facts/s)",
        file=sys.stderr,
    )
    if "ratio_to_embedding_only" in stats:
        print(
            f"ingest: {stats['facts_in_per_s']} facts in/s, "
            f"{stats['ratio_to_embedding_only']}x the embedding-only rate "
            f"({stats['embedding_only_facts_per_s']} facts/s)",
            file=sys.stderr,
        )


def cmd_bench_longmemeval(args: argparse.Namespace) -> int:
    """Build one memory per question's haystack, ask every question in one variant, write the
    official retrieval scores per question type."""
    if args.variant not in locomo.MEMORY_VARIANTS:
        raise InvalidInput(
            f"unknown variant {args.variant!r}; choose from {', '.join(locomo.MEMORY_VARIANTS)}"
        )
    if not 1 <= args.k <= 100 or (args.limit is not None and args.limit < 1):
        raise InvalidInput("--k must lie between 1 and 100, and --limit be 1 or more")
    data = Path(args.data)
    items = longmemeval.load_questions(data, args.only, args.limit)
    if args.reuse and not args.data_dir and get_settings().store.qdrant_url is None:
        raise InvalidInput("--reuse queries spaces built before: pass the --data-dir holding them")
    _check_judge(args)
    tenant, ctx = _bench_setup(args)
    judge = getattr(ctx.backend, "judge", None) if args.judge else None
    client = producer()
    spaces = [item.space for item in items]
    if args.reuse:
        ingest_stats = locomo.counts(ctx.store, tenant, spaces, None)
    else:
        ingest_stats = locomo.ingest(client, ctx, tenant, spaces, args.quiet)
        _print_ingest(ingest_stats)
    ingest_stats["spaces"] = ingest_stats.pop("conversations")  # one per question
    first = items[0].question
    client.search(tenant, first.question_id, first.question)  # warm the worker and the index
    rows, stages = longmemeval.run(
        client, tenant, items, args.variant, args.k, args.answer, args.quiet, judge
    )
    command = "atommem " + shlex.join(sys.argv[1:])
    doc = locomo.result_document(
        args.variant, args.k, command, rows, stages, ingest_stats, _recall_settings(),
        "longmemeval", longmemeval.summarize,
    )  # fmt: skip
    doc = {"data": str(data), **doc}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    _print_longmemeval(doc["summary"])
    print(f"results: {out}", file=sys.stderr)
    return 0


LONGMEMEVAL_COLUMNS = (
    ("session", "recall_all@5", "s.all@5"),
    ("session", "ndcg_any@5", "s.ndcg@5"),
    ("session", "recall_all@10", "s.all@10"),
    ("session", "ndcg_any@10", "s.ndcg@10"),
    ("turn", "recall_all@5", "t.all@5"),
    ("turn", "ndcg_any@5", "t.ndcg@5"),
    ("turn", "recall_all@10", "t.all@10"),
    ("turn", "ndcg_any@10", "t.ndcg@10"),
)


def _print_longmemeval(summary: dict[str, dict[str, Any]]) -> None:
    """A line per question type and overall: the scored questions (abstentions beside them),
    recall_all and NDCG at 5 and 10 of sessions and turns, F1 and J when answered."""
    answered = [m for m in ("f1", "judge") if m in summary["overall"]]
    head = [label for _, _, label in LONGMEMEVAL_COLUMNS] + [m.upper() for m in answered]
    print(f"{'question type':<26} {'n':>4} {'abs':>4} " + " ".join(f"{h:>9}" for h in head))
    for name, entry in summary.items():
        cells = [entry[level][metric] for level, metric, _ in LONGMEMEVAL_COLUMNS]
        cells += [entry.get(m) for m in answered]
        print(
            f"{name:<26} {entry['questions']:>4} {entry['abstention']:>4} "
            + " ".join(f"{_pct(c):>9}" for c in cells)
        )


def _cell(value: float | None) -> str:
    return f"{value:>11.2f}" if value is not None else f"{'-':>11}"


def cmd_bench_scale(args: argparse.Namespace) -> int:
    """Synthetic spaces of growing size: ingest rate (against embedding alone), query latency,
    and with the embedded store the cold open of each space in a fresh process."""
    sizes = sorted(set(args.sizes))
    if not sizes or sizes[0] < scale.FACTS_PER_TURN or args.queries < 1:
        raise InvalidInput("--sizes must be positive fact counts and --queries at least 1")
    tenant, ctx = _bench_setup(args)
    client = producer()
    settings = runtime.settings()
    embedded = settings.broker.url is None and settings.store.qdrant_url is None
    rows = []
    out = Path(args.out)
    for size in sizes:
        row = scale.run_size(client, ctx, tenant, size, args.queries, args.seed, args.quiet)
        if embedded:
            question = scale.synthetic_questions(1, args.seed)[0]
            row["cold_open"] = _cold_open(tenant, row["space"], question)
            phases = row["phase_seconds"]
            phases["close"] = row["cold_open"].pop("close_s")
            phases["cold_open_process"] = row["cold_open"]["process_s"]
            client, ctx = _reopened()
        rows.append(row)
        lat = row["latency_ms"]
        print(
            f"{size:>8} facts: ingest {row['facts_per_s']:.1f} facts/s "
            f"({row['ratio_to_embedding_only']:.2f}x embedding alone, "
            f"{row['embedding_only_facts_per_s']:.1f} facts/s), query p50 "
            f"{lat['through_query_worker']['p50']:.1f} ms p95 "
            f"{lat['through_query_worker']['p95']:.1f} ms, graph p50 {lat['graph']['p50']:.1f} "
            f"ms, lexical p50 {lat['lexical']['p50']:.2f} ms, primary p50 "
            f"{lat['primary']['p50']:.2f} ms"
        )
        if "cold_open" in row:
            cold = row["cold_open"]
            print(
                f"{size:>8} facts: cold open {cold['cold_open_s']:.2f} s (store "
                f"{cold['store_open_s']:.2f} s, index {cold['index_s']:.2f} s, saved index "
                f"{'yes' if cold['saved_index'] else 'no'}), first query "
                f"{cold['first_query_s']:.2f} s; process start-up {cold['startup_s']:.2f} s + "
                f"imports {cold['import_s']:.2f} s + model {cold['model_load_s']:.2f} s"
            )
        doc = {
            "benchmark": "scale",
            "command": "atommem " + shlex.join(sys.argv[1:]),
            "broker": "embedded" if settings.broker.url is None else "redis",
            "sizes": rows,
            "growth": scale.growth(rows),
        }
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")  # after every size
    print(f"results: {out}", file=sys.stderr)
    return 0


def _cold_open(tenant: str, space: str, question: str) -> scale.Timings:
    """Close this process's store as a stopping worker does (the large spaces' indexes are
    saved), then time a fresh process opening the space and answering its first query."""
    _wait_idle()
    began = time.perf_counter()
    runtime.reset()
    closed = time.perf_counter() - began
    cold = scale.cold_open(runtime.settings().store.qdrant_path, tenant, space, question)
    cold["close_s"] = round(closed, 2)
    return cold


def _wait_idle(timeout: float = 120.0) -> None:
    """Until the embedded worker runs and holds no task (a job is done before the tasks that
    follow its commit, such as profile batches, have all finished)."""
    from celery.worker import state

    deadline = time.monotonic() + timeout
    quiet_since = None
    while time.monotonic() < deadline:
        if state.active_requests or state.reserved_requests:
            quiet_since = None
        elif quiet_since is None:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since >= 0.5:
            return
        time.sleep(0.05)
    raise InvalidInput("the embedded worker did not go idle after the ingest")


def _reopened() -> tuple[Producer, MemoryContext]:
    """A producer on the reopened coordination journal, and the context (the store reopens on
    its first call); the embedded worker keeps running and re-fetches both per task."""
    from workers.celery_app import app

    coord = runtime.coordination()
    return Producer(app, coord.jobs, coord.sequence), runtime.context()


def cmd_bench_extract(args: argparse.Namespace) -> int:
    """The configured extractor over the dialogue, matched turn by turn with the authors'
    facts: precision, recall, F1 and the guideline faults, beside the committed downstream
    Recall@10."""
    eq = extract_quality
    threshold = eq.THRESHOLD if args.threshold is None else args.threshold
    window = eq.WINDOW if args.window is None else args.window
    if not 0.0 < threshold < 1.0 or window < 0:
        raise InvalidInput("--threshold must lie between 0 and 1, and --window be 0 or more")
    _, ctx = _bench_setup(args)  # the store is a throwaway: extraction writes nothing
    settings = runtime.settings()
    llm = settings.llm
    model = {"openai": llm.extractor_endpoint.model, "vllm": llm.vllm.model}.get(llm.extractor_role)
    used = {
        "llm_backend": llm.backend_name,
        "extractor_role": llm.extractor_role,
        "extractor_model": model,
        "skip_rules": llm.skip_rules,
        "context_window_k": settings.memory.context_window_k,
        "extract_batch_turns": settings.pipeline.extract_batch_turns,
        "embedding_model": str(settings.embedding.model_path or "all-MiniLM-L6-v2"),
        "embedding_runtime": settings.embedding.runtime,
    }
    compared = eq.compare(ctx, Path(args.conversations), Path(args.facts), args.only)
    recall_files = (
        Path(args.recall_dialogue or eq.DIALOGUE_RECALL),
        Path(args.recall_facts or eq.FACTS_RECALL),
    )
    command = "atommem " + shlex.join(sys.argv[1:])
    labels = Path(args.labels or eq.THRESHOLD_LABELS)
    doc = eq.result_document(compared, threshold, window, command, used, recall_files, labels)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    _print_extract(doc)
    print(f"results: {out}", file=sys.stderr)
    return 0


def _print_extract(doc: dict[str, Any]) -> None:
    print(
        f"extractor {doc['settings']['llm_backend']}, cosine >= {doc['threshold']}, "
        f"pairs at most {doc['window_turns']} turns apart"
    )
    print(
        f"{'conversation':<13} {'extracted':>9} {'reference':>9} {'matched':>7}   P      R      F1"
    )
    rows = {**doc["per_conversation"], "overall": doc["summary"]}
    for name, s in rows.items():
        print(
            f"{name:<13} {s['extracted']:>9} {s['reference']:>9} {s['matched']:>7} "
            f"{s['precision']:6.2f} {s['recall']:6.2f} {s['f1']:6.2f}"
        )
    mine, theirs = doc["summary"]["faults_extracted"], doc["summary"]["faults_reference"]
    print(f"{'fault, % of facts':<24} {'extracted':>9} {'reference':>9}")
    for name, rate in mine["rates"].items():
        print(f"{name:<24} {_pct(rate):>9} {_pct(theirs['rates'][name]):>9}")
    for label, recall in doc["downstream_recall_at_10"].items():
        if recall.get("missing"):
            print(f"Recall@10, {label}: {recall['file']} is missing")
            continue
        note = f" ({recall['note']})" if "note" in recall else ""
        overall = recall["overall"]["recall"] if recall["overall"] else None
        print(f"Recall@10, {label}: {_pct(overall)} from {recall['file']}{note}")


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def cmd_bench_report(args: argparse.Namespace) -> int:
    paths: list[Path] = []
    for raw in args.results:
        path = Path(raw)
        paths.extend(sorted(path.glob("*.json")) if path.is_dir() else [path])
    if not paths:
        raise InvalidInput("no result files given")
    folds: dict[str, list[str]] = {}
    for spec in args.fold:
        name, _, members = spec.partition("=")
        conversations = [m.strip() for m in members.split(",") if m.strip()]
        if not name or not conversations:
            raise InvalidInput(f"--fold {spec!r}: expected NAME=conv-a,conv-b")
        folds[name] = conversations
    markdown, plot = write_report(paths, Path(args.out), folds)
    print(f"wrote {markdown} and {plot}")
    return 0
