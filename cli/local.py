"""The commands that run against this machine's store and the task graph (embedded, or the
Redis queues when a broker is set)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from tqdm import tqdm

from cli.context import context, producer, setup, store_reachable
from cli.output import print_profile, show_answer, show_search, usage_line
from common.errors import InvalidInput
from common.inputs.formats import SpaceInput, read_sessions
from common.memory.changes import CommitStats
from common.memory.context import MemoryContext
from common.models.jobs import Job
from common.producer import MemoryClient
from common.store import records
from common.store.qdrant import Kind
from workers import runtime


def _inputs(paths: Sequence[str], fmt: str) -> list[tuple[Path, SpaceInput]]:
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = sorted(path.glob("*.json"))
            if not found:
                raise InvalidInput(f"{path}: no .json files in this directory")
            files.extend(found)
        else:
            files.append(path)
    # Read and validate everything first: a bad file stores nothing.
    return [(f, read_sessions(f, fmt)) for f in files]  # type: ignore[arg-type]


def cmd_ingest(args: argparse.Namespace) -> int:
    inputs = _inputs(args.paths, args.format)
    tenant = setup(args)
    batches: list[tuple[str, SpaceInput]] = []
    for path, data in inputs:
        space = args.space or data.space
        if not space:
            raise InvalidInput(f"{path}: the file names no space; pass --space")
        batches.append((space, data))
    if store_reachable():
        ctx = context()
        for space, _ in batches:
            if args.create_space:
                records.create_space(ctx.store, tenant, space, exist_ok=True)
            else:
                records.require_space(ctx.store, tenant, space)
        ctx.embedder.encode([])  # load the model before the clock starts: rates measure ingest
    elif args.create_space:
        raise InvalidInput("--create-space needs the store: create spaces through a worker")
    client = producer()
    started = time.perf_counter()
    _resume_open(client)
    jobs = client.submit_many(
        tenant, [(space, s) for space, data in batches for s in data.sessions]
    )
    bar = tqdm(total=len(jobs), desc="sessions", unit="session", disable=args.quiet)

    def progress(done: int) -> None:
        bar.update(done - bar.n)

    finished = client.wait(tenant, [j.job_id for j in jobs], on_progress=progress)
    bar.close()
    seconds = time.perf_counter() - started
    return _report(tenant, finished, seconds)


def _resume_open(client: MemoryClient) -> list[Job]:
    """In embedded mode, send again the jobs an interrupted run left unfinished."""
    if runtime.settings().broker.url is not None:
        return []
    jobs = client.resend_open()
    if jobs:
        print(f"resuming {len(jobs)} unfinished jobs of an interrupted run", file=sys.stderr)
    return list(jobs)


def cmd_resume(args: argparse.Namespace) -> int:
    """Finish what an interrupted embedded run left: its journaled, unfinished jobs."""
    tenant = setup(args)
    if runtime.settings().broker.url is not None:
        raise InvalidInput("resume is for embedded runs; with a broker the queues keep the work")
    if store_reachable():
        context().embedder.encode([])
    client = producer()
    started = time.perf_counter()
    jobs = _resume_open(client)
    if not jobs:
        print("nothing to resume")
        return 0
    by_tenant: dict[str, list[str]] = defaultdict(list)
    for job in jobs:
        by_tenant[job.tenant].append(job.job_id)
    finished = [j for t, ids in by_tenant.items() for j in client.wait(t, ids)]
    return _report(tenant, finished, time.perf_counter() - started)


def _report(tenant: str, finished: list[Job], seconds: float) -> int:
    per_space: dict[str, CommitStats] = defaultdict(CommitStats)
    failed = [j for j in finished if j.state == "failed"]
    sessions: dict[str, int] = defaultdict(int)
    unchanged: dict[str, int] = defaultdict(int)
    for job in finished:
        sessions[job.space] += 1
        unchanged[job.space] += job.unchanged
        per_space[job.space].add(CommitStats.from_counts(job.counts))
    for space, total in per_space.items():
        line = (
            f"{space}: {sessions[space]} sessions ({unchanged[space]} unchanged), "
            f"{total.facts_in} facts in, "
            f"{total.facts_stored} stored, {total.duplicates_dropped} duplicates, "
            f"{total.updates} updates, {total.events_created} events created"
        )
        if store_reachable():
            ctx = context()
            counts = [
                ctx.store.count(k, tenant, space) for k in (Kind.FACTS, Kind.EVENTS, Kind.PROFILES)
            ]
            line += f" | space now {counts[0]} facts, {counts[1]} events, {counts[2]} profiles"
        print(line)
    facts = sum(s.facts_in for s in per_space.values())
    rate = facts / seconds if seconds > 0 else 0.0
    print(f"total: {len(finished)} sessions, {facts} facts in {seconds:.1f}s ({rate:.0f} facts/s)")
    spent = CommitStats()
    for stats in per_space.values():
        spent.add(stats)
    line = usage_line(spent.llm_usage)
    if line:
        print(line)
    for job in failed:
        print(
            f"failed: {job.space}/{job.session_id} (job {job.job_id}): {job.reason}",
            file=sys.stderr,
        )
    return 1 if failed else 0


def _space(ctx: MemoryContext, tenant: str, space: str) -> None:
    records.require_space(ctx.store, tenant, space)


def cmd_facts(args: argparse.Namespace) -> int:
    tenant = setup(args)
    ctx = context()
    _space(ctx, tenant, args.space)
    facts = sorted(
        ctx.index(tenant, args.space).facts.items(),
        key=lambda f: (f.source.session_seq, f.source.positions),
    )
    for fact in facts[: args.limit]:
        if args.json:
            print(fact.model_dump_json())
            continue
        when = f" [{fact.time.event.start}..{fact.time.event.end}]" if fact.time.event else ""
        turns = ",".join(fact.all_turn_ids())
        print(f"- {fact.text}{when}  ({turns}; {', '.join(fact.keywords)})")
        for rev in fact.history:
            print(f"    was: {rev.text} (replaced in {rev.replaced_by_session})")
    print(f"{len(facts)} facts")
    return 0


def cmd_events(args: argparse.Namespace) -> int:
    tenant = setup(args)
    ctx = context()
    _space(ctx, tenant, args.space)
    index = ctx.index(tenant, args.space)
    events = index.events.items()
    for event in events[: args.limit]:
        if args.json:
            print(event.model_dump_json())
            continue
        span = f" [{event.time_span.start}..{event.time_span.end}]" if event.time_span else ""
        print(f"* {event.summary}{span}  ({len(event.fact_ids)} facts)")
        for fid in event.fact_ids:
            if fid in index.facts:
                print(f"    - {index.facts.get(fid).text}")
    print(f"{len(events)} events")
    return 0


def cmd_profiles(args: argparse.Namespace) -> int:
    tenant = setup(args)
    ctx = context()
    _space(ctx, tenant, args.space)
    profiles = sorted(
        ctx.index(tenant, args.space).profiles.items(), key=lambda p: (p.person, p.t_from)
    )
    for profile in profiles[: args.limit]:
        if args.json:
            print(profile.model_dump_json())
        else:
            print_profile(profile)
    print(f"{len(profiles)} profiles")
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    tenant = setup(args)
    return show_search(args, producer().search(tenant, args.space, args.question, k=args.k))


def cmd_ask(args: argparse.Namespace) -> int:
    tenant = setup(args)
    return show_answer(args, producer().ask(tenant, args.space, args.question))


def cmd_delete(args: argparse.Namespace) -> int:
    """Erase a fact, a session's contribution, or a whole space, from every store."""
    tenant = setup(args)
    client = producer()
    if args.everything:
        erased = client.admin(tenant, args.space, "erase_space")
    elif args.fact:
        erased = client.admin(tenant, args.space, "erase_fact", args.fact)
    else:
        erased = client.admin(tenant, args.space, "erase_session", args.session)
    print(json.dumps(erased["erased"], indent=2))
    return 0


def cmd_profile_batch(args: argparse.Namespace) -> int:
    """Send an on-demand profile batch for a space."""
    tenant = setup(args)
    client = producer()
    client.flush_profiles(tenant, args.space)
    print(f"profile batch done for space {args.space!r}")
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    tenant = setup(args)
    ctx = context()
    if args.space:
        spaces = [records.require_space(ctx.store, tenant, args.space)]
    else:
        spaces = records.list_spaces(ctx.store, tenant)
    print(f"{'space':<20} {'sessions':>8} {'facts':>7} {'events':>7} {'profiles':>8}")
    kinds = (Kind.SESSIONS, Kind.FACTS, Kind.EVENTS, Kind.PROFILES)
    for sp in spaces:
        counts = [ctx.store.count(k, tenant, sp.space) for k in kinds]
        print(f"{sp.space:<20} {counts[0]:>8} {counts[1]:>7} {counts[2]:>7} {counts[3]:>8}")
    return 0


def cmd_space(args: argparse.Namespace) -> int:
    tenant = setup(args)
    ctx = context()
    if args.action == "create":
        if not args.name:
            raise InvalidInput("space create needs a NAME")
        try:
            records.create_space(ctx.store, tenant, args.name)
        except ValueError as exc:
            raise InvalidInput(str(exc)) from None
        print(f"created space {args.name!r}")
    else:
        for sp in records.list_spaces(ctx.store, tenant):
            print(f"{sp.space}\t{', '.join(sp.participants)}")
    return 0


def cmd_job(args: argparse.Namespace) -> int:
    tenant = setup(args)
    client = producer()
    job = (
        client.retry(tenant, args.job_id)
        if args.action == "retry"
        else client.job(tenant, args.job_id)
    )
    if args.action == "retry":
        job = client.wait(tenant, [job.job_id])[0]
    print(job.model_dump_json(indent=2))
    return 0
