"""The commands that run against this machine's store and the task graph (embedded, or the
Redis queues when a broker is set)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from pydantic import SecretStr
from qdrant_client.http.exceptions import ApiException
from tqdm import tqdm

from cli.context import context, producer, setup, store_reachable
from cli.output import print_event, print_fact, print_profile, show_answer, show_search, usage_line
from common.errors import InvalidInput
from common.inputs.formats import SpaceInput, read_sessions
from common.memory.changes import CommitStats
from common.models.jobs import Job
from common.models.memory import Event, Fact, Profile
from common.producer import MemoryClient
from common.store import records
from common.store.backends import open_store
from common.store.base import Kind, Store, StoreError
from common.store.space_index import SpaceIndex
from common.store.transfer import copy_space
from workers import runtime

R = TypeVar("R", Fact, Event, Profile)


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
            now = records.space_counts(ctx.store, tenant, space)
            line += (
                f" | space now {now['facts']} facts, {now['events']} events, "
                f"{now['profiles']} profiles"
            )
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


def _index(args: argparse.Namespace) -> SpaceIndex:
    """The space's index, opened by this process (the listings read the store directly)."""
    tenant = setup(args)
    ctx = context()
    records.require_space(ctx.store, tenant, args.space)
    return ctx.index(tenant, args.space)


def _listing(
    args: argparse.Namespace, kind: str, items: Sequence[R], show: Callable[[R], None]
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
    facts = sorted(
        _index(args).facts.items(), key=lambda f: (f.source.session_seq, f.source.positions)
    )
    return _listing(args, "facts", facts, print_fact)


def cmd_events(args: argparse.Namespace) -> int:
    index = _index(args)
    return _listing(args, "events", index.events.items(), lambda e: print_event(e, index.facts))


def cmd_profiles(args: argparse.Namespace) -> int:
    profiles = sorted(_index(args).profiles.items(), key=lambda p: (p.person, p.t_from))
    return _listing(args, "profiles", profiles, print_profile)


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
    for sp in spaces:
        c = records.space_counts(ctx.store, tenant, sp.space)
        print(
            f"{sp.space:<20} {c['sessions']:>8} {c['facts']:>7} {c['events']:>7} {c['profiles']:>8}"
        )
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


def _other_store(args: argparse.Namespace, where: str) -> Store:
    """The store named on the command line: a Qdrant server for an http(s) URL (key from
    --api-key, else ATOMMEM_STORE__QDRANT_API_KEY), else an Edge store in a data directory
    (`DIR/qdrant`, as --data-dir lays it out, or DIR itself when it is a store directory)."""
    settings = runtime.settings()
    if where.startswith(("http://", "https://")):
        key = SecretStr(args.api_key) if args.api_key else settings.store.qdrant_api_key
        update: dict[str, object] = {"qdrant_url": where, "qdrant_api_key": key}
    else:
        from common.store.edge import MARKER  # the engine loads only for an Edge directory

        if args.api_key:
            raise InvalidInput("--api-key is for a Qdrant server URL (http:// or https://)")
        root = Path(where)
        path = root if (root / MARKER).exists() else root / "qdrant"
        update = {"qdrant_url": None, "qdrant_path": path}
    return open_store(settings.store.model_copy(update=update), settings.embedding.dimension)


def _transfer(args: argparse.Namespace, pushing: bool) -> int:
    """Copy a space between this process's store and the one named on the command line."""
    tenant = setup(args)
    settings = runtime.settings()
    # only the stores: no queues or journal. An embedded store a worker owns fails on first
    # use with the store's own message (StoreBusy).
    here = open_store(settings.store, settings.embedding.dimension)
    there = _other_store(args, args.to if pushing else args.source)
    source, target = (here, there) if pushing else (there, here)
    bars: dict[Kind, tqdm[None]] = {}

    def progress(kind: Kind, done: int, total: int) -> None:
        bar = bars.get(kind)
        if bar is None:
            bar = bars[kind] = tqdm(total=total, desc=kind.value, unit="pt", disable=args.quiet)
        bar.update(done - bar.n)
        if done >= total:
            bar.close()

    try:
        report = copy_space(
            source, target, tenant, args.space, replace=args.replace, on_progress=progress
        )
    except ApiException as exc:  # the server store passes qdrant-client's errors through
        servers = " and ".join(s.location for s in (source, target) if "://" in s.location)
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise StoreError(
            f"the Qdrant server {servers} failed: {first}; check the URL and the API key"
        ) from None
    finally:
        for bar in bars.values():
            bar.close()
        try:
            there.close()
        finally:
            here.close()
    if report.cleared:
        print(f"cleared {report.cleared} points an interrupted copy left", file=sys.stderr)
    copied = ", ".join(f"{report.copied[k]} {k.value}" for k in records.SPACE_KINDS.values())
    verb = "replaced" if report.replaced else "copied"
    print(f"{verb} space {args.space!r} at {target.location} from {source.location}: {copied}")
    return 0


def cmd_space_push(args: argparse.Namespace) -> int:
    """Copy a space from this process's store to --to (a Qdrant URL or a data directory)."""
    return _transfer(args, pushing=True)


def cmd_space_pull(args: argparse.Namespace) -> int:
    """Copy a space from --from (a Qdrant URL or a data directory) into this process's store."""
    return _transfer(args, pushing=False)
