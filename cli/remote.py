"""`atommem` against a running AtomMem server (`ATOMMEM_API__URL`, `ATOMMEM_API__KEY`):
the same commands, through the SDK; the tenant is the key's."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

from api.client import AtomMem, ConflictError, Kind
from cli.output import show_answer, show_search
from common.errors import InvalidInput
from common.inputs.formats import read_sessions
from common.models.memory import Event, Fact, Profile
from common.settings import Settings


def client(settings: Settings) -> AtomMem:
    if settings.api.key is None:
        raise InvalidInput("ATOMMEM_API__URL is set: also set ATOMMEM_API__KEY (a tenant's key)")
    return AtomMem(str(settings.api.url), settings.api.key.get_secret_value())


def ingest(mem: AtomMem, args: argparse.Namespace) -> int:
    batches = []
    for raw in args.paths:
        path = Path(raw)
        for file in sorted(path.glob("*.json")) if path.is_dir() else [path]:
            data = read_sessions(file, args.format)
            space = args.space or data.space
            if not space:
                raise InvalidInput(f"{file}: the file names no space; pass --space")
            batches.append((space, data))
    for space in dict.fromkeys(space for space, _ in batches):
        if args.create_space:
            with contextlib.suppress(ConflictError):  # exists already: fine
                mem.create_space(space)
        else:
            mem.get_space(space)
    started = time.perf_counter()
    jobs = [mem.add(space, s) for space, data in batches for s in data.sessions]
    finished = mem.wait([j.job_id for j in jobs], timeout=24 * 3600)
    failed = [j for j in finished if j.state == "failed"]
    facts = sum(j.counts.get("facts_in", 0) for j in finished)
    unchanged = sum(j.unchanged for j in finished)
    seconds = time.perf_counter() - started
    print(f"total: {len(finished)} sessions ({unchanged} unchanged), {facts} facts in "
          f"{seconds:.1f}s")  # fmt: skip
    for job in failed:
        print(f"failed: {job.space}/{job.session_id}: {job.reason}", file=sys.stderr)
    return 1 if failed else 0


def search(mem: AtomMem, args: argparse.Namespace) -> int:
    found = mem.search(args.space, args.question, k=args.k)
    # cli.output prints the dicts the local path gets from the producer
    return show_search(args, found.model_dump(mode="json"))


def ask(mem: AtomMem, args: argparse.Namespace) -> int:
    return show_answer(args, mem.ask(args.space, args.question).model_dump(mode="json"))


def _text(item: Fact | Event | Profile) -> str:
    if isinstance(item, Fact):
        return item.text
    if isinstance(item, Event):
        return item.summary
    return item.content


def listing(kind: Kind) -> Callable[[AtomMem, argparse.Namespace], int]:
    def run(mem: AtomMem, args: argparse.Namespace) -> int:
        items = mem.get_all(args.space, kind)
        for item in items[: args.limit]:
            print(json.dumps(item.model_dump(mode="json")) if args.json else f"- {_text(item)}")
        print(f"{len(items)} {kind}")
        return 0

    return run


def stats(mem: AtomMem, args: argparse.Namespace) -> int:
    spaces = [mem.get_space(args.space)] if args.space else mem.list_spaces()
    print(f"{'space':<20} {'sessions':>8} {'facts':>7} {'events':>7} {'profiles':>8}")
    for sp in spaces:
        c = sp.counts
        print(f"{sp.name:<20} {c.sessions:>8} {c.facts:>7} {c.events:>7} {c.profiles:>8}")
    return 0


def space(mem: AtomMem, args: argparse.Namespace) -> int:
    if args.action == "create":
        if not args.name:
            raise InvalidInput("space create needs a NAME")
        mem.create_space(args.name)
        print(f"created space {args.name!r}")
    else:
        for sp in mem.list_spaces():
            print(sp.name)
    return 0


def job(mem: AtomMem, args: argparse.Namespace) -> int:
    if args.action == "retry":
        raise InvalidInput("job retry runs against the queues, not a server: resubmit the session")
    print(json.dumps(mem.job(args.job_id).model_dump(mode="json"), indent=2))
    return 0


def delete(mem: AtomMem, args: argparse.Namespace) -> int:
    if args.everything:
        erased = mem.delete_space(args.space)
    else:
        erased = mem.delete(args.space, fact_id=args.fact, session_id=args.session)
    print(json.dumps(erased.erased.model_dump(), indent=2))
    return 0


COMMANDS: dict[str, Callable[[AtomMem, argparse.Namespace], int]] = {
    "ingest": ingest,
    "search": search,
    "ask": ask,
    "facts": listing("facts"),
    "events": listing("events"),
    "profiles": listing("profiles"),
    "stats": stats,
    "space": space,
    "job": job,
    "delete": delete,
}
