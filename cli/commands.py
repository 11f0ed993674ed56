"""The commands over a tenant's memory, one set whichever `Memory` serves them: this
machine's producer (embedded or queues) or a server through the SDK (cli.context)."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from tqdm import tqdm

from cli.context import embedded, local, memory, resume_open, warm
from cli.output import print_event, print_fact, print_profile, show_answer, show_search, usage_line
from common.errors import Conflict, InvalidInput, NotFound
from common.inputs.formats import SpaceInput, read_sessions
from common.memory.changes import CommitStats
from common.models.api import RawSession
from common.models.jobs import Job
from common.models.memory import Event, Fact, Profile
from common.models.responses import Kind
from common.service import Memory

Record = TypeVar("Record", Fact, Event, Profile)


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
    """Queue the files' sessions (every space checked, or created, first) and wait."""
    batches: list[tuple[str, RawSession]] = []
    for path, data in _inputs(args.paths, args.format):
        space = args.space or data.space
        if not space:
            raise InvalidInput(f"{path}: the file names no space; pass --space")
        batches += [(space, s) for s in data.sessions]
    mem = memory(args)
    for space in dict.fromkeys(space for space, _ in batches) if args.create_space else ():
        with contextlib.suppress(Conflict):  # exists already: fine
            mem.create_space(space)
    warm(mem)
    started = time.perf_counter()
    resume_open(mem)
    try:
        jobs = mem.add_many(batches)
    except NotFound as exc:
        if args.create_space or "does not exist" not in str(exc):
            raise
        raise NotFound(f"{exc}; pass --create-space to create it") from None
    return report(mem, wait(mem, jobs, args.quiet), time.perf_counter() - started)


def cmd_resume(args: argparse.Namespace) -> int:
    """Finish what an interrupted embedded run left: its journaled, unfinished jobs (of any
    tenant)."""
    mem = local(args)
    if not embedded():
        raise InvalidInput("resume is for embedded runs; with a broker the queues keep the work")
    warm(mem)
    started = time.perf_counter()
    jobs = resume_open(mem)
    if not jobs:
        print("nothing to resume")
        return 0
    by_tenant: dict[str, list[str]] = defaultdict(list)
    for job in jobs:
        by_tenant[job.tenant].append(job.job_id)
    finished = [j for t, ids in by_tenant.items() for j in mem.producer.wait(t, ids)]
    return report(mem, finished, time.perf_counter() - started)


def wait(mem: Memory, jobs: Sequence[Job], quiet: bool) -> list[Job]:
    """Every job once finished, with a progress bar."""
    bar = tqdm(total=len(jobs), desc="sessions", unit="session", disable=quiet)

    def progress(done: int) -> None:
        bar.update(done - bar.n)

    try:
        return mem.wait([j.job_id for j in jobs], timeout=None, on_progress=progress)
    finally:
        bar.close()


def report(mem: Memory, finished: list[Job], seconds: float) -> int:
    """Per space what its jobs did and what it holds now; the total rate; each failure."""
    per_space: dict[str, CommitStats] = defaultdict(CommitStats)
    sessions: dict[str, int] = defaultdict(int)
    unchanged: dict[str, int] = defaultdict(int)
    for job in finished:
        sessions[job.space] += 1
        unchanged[job.space] += job.unchanged
        per_space[job.space].add(CommitStats.from_counts(job.counts))
    for space, total in per_space.items():
        now = mem.get_space(space).counts
        print(
            f"{space}: {sessions[space]} sessions ({unchanged[space]} unchanged), "
            f"{total.facts_in} facts in, "
            f"{total.facts_stored} stored, {total.duplicates_dropped} duplicates, "
            f"{total.updates} updates, {total.events_created} events created"
            f" | space now {now.facts} facts, {now.events} events, {now.profiles} profiles"
        )
    facts = sum(s.facts_in for s in per_space.values())
    rate = facts / seconds if seconds > 0 else 0.0
    kept = sum(unchanged.values())
    print(
        f"total: {len(finished)} sessions ({kept} unchanged), {facts} facts in {seconds:.1f}s "
        f"({rate:.0f} facts/s)"
    )
    spent = CommitStats()
    for stats in per_space.values():
        spent.add(stats)
    line = usage_line(spent.llm_usage)
    if line:
        print(line)
    failed = [j for j in finished if j.state == "failed"]
    for job in failed:
        print(
            f"failed: {job.space}/{job.session_id} (job {job.job_id}): {job.reason}",
            file=sys.stderr,
        )
    return 1 if failed else 0


def _listing(
    args: argparse.Namespace, kind: Kind, items: Sequence[Record], show: Callable[[Record], None]
) -> int:
    """The first `--limit` items, as JSON lines or as text, then how many there are."""
    for item in items[: args.limit]:
        if args.json:
            print(item.model_dump_json())
        else:
            show(item)
    print(f"{len(items)} {kind}")
    return 0


def cmd_facts(args: argparse.Namespace) -> int:
    """A space's facts in session order, each with its earlier texts."""
    return _listing(args, "facts", memory(args).get_all(args.space, "facts"), print_fact)


def cmd_events(args: argparse.Namespace) -> int:
    """A space's events, each with the text of its member facts still stored."""
    mem = memory(args)
    facts: dict[str, Fact] = {}

    def show(event: Event) -> None:
        if not facts:
            facts.update((f.id, f) for f in mem.get_all(args.space, "facts"))
        print_event(event, facts)

    return _listing(args, "events", mem.get_all(args.space, "events"), show)


def cmd_profiles(args: argparse.Namespace) -> int:
    """A space's profiles by person, each with its earlier versions."""
    profiles = memory(args).get_all(args.space, "profiles")
    profiles.sort(key=lambda p: (p.person, p.t_from))
    return _listing(args, "profiles", profiles, print_profile)


def cmd_search(args: argparse.Namespace) -> int:
    return show_search(args, memory(args).search(args.space, args.question, k=args.k))


def cmd_ask(args: argparse.Namespace) -> int:
    return show_answer(args, memory(args).ask(args.space, args.question))


def cmd_delete(args: argparse.Namespace) -> int:
    """Erase a fact, a session's contribution, or a whole space, from every store."""
    mem = memory(args)
    if args.everything:
        receipt = mem.delete_space(args.space)
    else:
        receipt = mem.delete(args.space, fact_id=args.fact, session_id=args.session)
    print(json.dumps(receipt.erased.model_dump(mode="json"), indent=2))
    return 0


def cmd_correct(args: argparse.Namespace) -> int:
    """Correct a fact's text; prints the receipt (the fact as it now reads, what was
    rebuilt)."""
    receipt = memory(args).correct_fact(args.space, args.fact, args.text, args.reason)
    print(receipt.model_dump_json(indent=2))
    return 0


def cmd_profile_batch(args: argparse.Namespace) -> int:
    """Run a space's profile batch now."""
    local(args).flush_profiles(args.space)
    print(f"profile batch done for space {args.space!r}")
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    mem = memory(args)
    spaces = [mem.get_space(args.space)] if args.space else mem.list_spaces()
    print(f"{'space':<20} {'sessions':>8} {'facts':>7} {'events':>7} {'profiles':>8}")
    for sp in spaces:
        c = sp.counts
        print(f"{sp.name:<20} {c.sessions:>8} {c.facts:>7} {c.events:>7} {c.profiles:>8}")
    return 0


def cmd_space(args: argparse.Namespace) -> int:
    """space create NAME, space list."""
    mem = memory(args)
    if args.action == "create":
        mem.create_space(args.name)
        print(f"created space {args.name!r}")
    else:
        for sp in mem.list_spaces():
            print(f"{sp.name}\t{', '.join(sp.participants)}")
    return 0


def cmd_job(args: argparse.Namespace) -> int:
    """job show ID, job retry ID (a failed one sent again, then waited for)."""
    if args.action == "retry":
        mem = local(args)
        job = mem.wait([mem.retry(args.job_id).job_id])[0]
    else:
        job = memory(args).job(args.job_id)
    print(job.model_dump_json(indent=2))
    return 0
