"""`atommem space rebuild` and `atommem space compare`: a space rebuilt from its stored
sessions by the current configuration, and two spaces side by side."""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

from bench import locomo
from bench.metrics import percentiles
from cli.commands import report, wait
from cli.context import context, local, producer, resume_open, setup, store_reachable, warm
from common.errors import InvalidInput, NotFound
from common.memory import rebuild
from common.memory.compare import (
    Comparison,
    RecallComparison,
    SpaceRecall,
    SpaceSide,
    compare,
    side,
)
from common.memory.version import memory_version
from common.models.memory import Fact, Profile
from common.producer import Producer
from common.store import records
from workers import runtime


def cmd_space_rebuild(args: argparse.Namespace) -> int:
    """Every stored session of SPACE, in session order, through the current configuration
    into --into, as ordinary jobs; running it again resumes it."""
    rebuild.check_spaces(args.space, args.into)
    mem = local(args)
    version = memory_version(runtime.settings())
    warm(mem)
    started = time.perf_counter()
    resume_open(mem)
    jobs = mem.rebuild(args.space, args.into)  # one admin task plans it under the target's lock
    print(
        f"rebuilding {args.space!r} into {args.into!r}: {len(jobs)} sessions, memory version "
        f"{version.label}",
        file=sys.stderr,
    )
    return report(mem, wait(mem, jobs, args.quiet), time.perf_counter() - started)


def _side(tenant: str, space: str) -> tuple[SpaceSide, list[Fact], list[Profile]]:
    """The space as the comparison sees it, with its facts in session order and profiles."""
    ctx = context()
    records.require_space(ctx.store, tenant, space)
    index = ctx.index(tenant, space)
    facts = sorted(index.facts.items(), key=lambda f: (f.source.session_seq, f.source.positions))
    events, profiles = index.events.items(), index.profiles.items()
    counts = records.space_counts(ctx.store, tenant, space)
    return side(space, counts, facts, events, profiles), facts, profiles


def _recall(
    client: Producer, tenant: str, spaces: list[str], questions: Path, k: int, quiet: bool
) -> RecallComparison:
    """Recall@k and query latency of each space on a LoCoMo-style question file, through the
    query worker in the configured recall mode (`bench locomo`'s scoring)."""
    conversations = locomo.load_conversations(questions, None)
    mode = runtime.settings().retrieval.mode
    for space in spaces:  # warm the query worker and each space's index before any clock
        for conv in conversations[:1]:
            for _, qa in conv.questions[:5]:
                client.search(tenant, space, qa["question"])
    out = RecallComparison(questions=str(questions), k=k, mode=mode, spaces={})
    for space in spaces:
        convs = [dataclasses.replace(c, name=space) for c in conversations]
        rows, stages = locomo.run_memory_variant(client, tenant, convs, mode, k, False, quiet)
        summary = locomo.summarize(rows)
        out.spaces[space] = SpaceRecall(
            recall={name: s["recall"] for name, s in summary.items()},
            questions=int(summary["overall"]["questions"] or 0),
            p50_ms=percentiles(stages["through_query_worker"])["p50"],
            p50_in_task_ms=percentiles(stages.get("total", []))["p50"],
        )
    return out


def cmd_space_compare(args: argparse.Namespace) -> int:
    """Two spaces side by side: counts, facts only in one, profile differences, memory
    versions, and with --questions the Recall@k and query p50 of each."""
    tenant = setup(args)
    if not store_reachable():
        raise InvalidInput(
            "space compare reads both spaces from the store: run it embedded, or "
            "with a Qdrant server URL next to the broker"
        )
    if args.a == args.b:
        raise InvalidInput("compare two different spaces")
    a, facts_a, profiles_a = _side(tenant, args.a)
    b, facts_b, profiles_b = _side(tenant, args.b)
    result = compare(a, b, facts_a, facts_b, profiles_a, profiles_b, args.show)
    if args.questions:
        path = Path(args.questions)
        if not path.is_file():
            raise NotFound(f"{path}: no such question file")
        context().embedder.encode([])
        recall = _recall(producer(), tenant, [args.a, args.b], path, args.k, args.quiet)
        result = result.model_copy(update={"recall": recall})
    if args.json:
        print(result.model_dump_json(indent=1))
    else:
        _print(result, args.show)
    return 0


def _print(c: Comparison, show: int) -> None:
    a, b = c.a, c.b
    width = max(len(a.space), len(b.space), 10)
    print(f"{'':<10} {a.space:>{width}} {b.space:>{width}}")
    for kind in records.SPACE_KINDS:
        print(f"{kind:<10} {a.counts.get(kind, 0):>{width}} {b.counts.get(kind, 0):>{width}}")
    print(
        f"facts by normalised text: {c.facts_shared} in both, {c.facts_only_a} only in "
        f"{a.space}, {c.facts_only_b} only in {b.space}"
    )
    for name, examples, total in (
        (a.space, c.examples_only_a, c.facts_only_a),
        (b.space, c.examples_only_b, c.facts_only_b),
    ):
        if examples:
            more = f" (first {len(examples)} of {total})" if total > len(examples) else ""
            print(f"only in {name}{more}:")
            for text in examples:
                print(f"  - {text}")
    print(f"profiles: {len(c.profiles)} people differ")
    for diff in c.profiles:
        print(f"  {diff.person}:")
        for name, contents in ((a.space, diff.only_a), (b.space, diff.only_b)):
            for content in contents[:show]:
                print(f"    only in {name}: {content}")
            if len(contents) > show:
                print(f"    ... {len(contents) - show} more only in {name}")
    print("memory versions:")
    for s in (a, b):
        for label, kinds in s.versions.items():
            counted = ", ".join(f"{n} {kind}" for kind, n in kinds.items())
            detail = s.version_details.get(label)
            prompts = (
                " prompts " + ",".join(f"{k}={v}" for k, v in sorted(detail.prompts.items()))
                if detail
                else ""
            )
            print(f"  {s.space}: {label}: {counted}{prompts}")
    if c.recall is not None:
        r = c.recall
        asked = r.spaces[a.space].questions
        print(f"Recall@{r.k} ({r.mode} recall, {asked} questions from {r.questions}):")
        cats = ("single_hop", "multi_hop", "temporal", "open_domain", "overall")
        print(f"{'':<{width}} " + " ".join(f"{x:>11}" for x in cats) + f" {'p50 ms':>8}")
        for s in (a, b):
            row = r.spaces[s.space]
            cells = " ".join(
                f"{row.recall[x]:>11.2f}" if row.recall.get(x) is not None else f"{'-':>11}"
                for x in cats
            )
            print(f"{s.space:<{width}} {cells} {row.p50_ms:>8.1f}")
