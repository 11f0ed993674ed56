"""The `atommem` command: ingest sessions, inspect memory, search and ask, on embedded defaults."""

from __future__ import annotations

import argparse
import atexit
import json
import shutil
import sys
import time
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

from tqdm import tqdm

from common.errors import AtomMemError, InvalidInput
from common.inputs.formats import SpaceInput, read_sessions
from common.memory.changes import CommitStats
from common.memory.context import MemoryContext
from common.models.memory import Profile
from common.settings import Settings, get_settings
from common.store import records
from common.store.qdrant import Kind


def _context(args: argparse.Namespace) -> tuple[MemoryContext, str]:
    from common.deps import build_context

    settings: Settings = get_settings()
    if args.data_dir:
        store = settings.store.model_copy(update={"qdrant_path": Path(args.data_dir) / "qdrant"})
        settings = settings.model_copy(update={"store": store})
    try:
        ctx = build_context(settings)
    except RuntimeError as exc:
        if "already accessed by another instance" in str(exc):
            raise AtomMemError(
                f"the store at {settings.store.qdrant_path} is open in another process; "
                "local mode allows one process (use a Qdrant server URL for more)"
            ) from None
        raise
    atexit.register(ctx.store.close)
    return ctx, args.tenant or settings.tenant


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
    ctx, tenant = _context(args)
    ctx.embedder.encode([])  # load the model before the clock starts: rates measure ingest
    grand = CommitStats()
    started = time.perf_counter()
    for path, data in inputs:
        space = args.space or data.space
        if not space:
            raise InvalidInput(f"{path}: the file names no space; pass --space")
        if args.create_space:
            records.create_space(ctx.store, tenant, space, exist_ok=True)
        else:
            records.require_space(ctx.store, tenant, space)
        from common.memory.ingest import ingest_session

        total = CommitStats()
        unchanged = 0
        t0 = time.perf_counter()
        bar = tqdm(data.sessions, desc=f"{space}", unit="session", disable=args.quiet, leave=False)
        for session in bar:
            outcome = ingest_session(ctx, tenant, space, session)
            unchanged += outcome.status == "unchanged"
            total.add(outcome.stats)
            bar.set_postfix(facts=total.facts_stored)
        seconds = time.perf_counter() - t0
        grand.add(total)
        counts = {
            k.value: ctx.store.count(k, tenant, space)
            for k in (Kind.FACTS, Kind.EVENTS, Kind.PROFILES)
        }
        rate = total.facts_in / seconds if seconds > 0 else 0.0
        print(
            f"{space}: {len(data.sessions)} sessions ({unchanged} unchanged), "
            f"{total.facts_in} facts in, {total.facts_stored} stored, "
            f"{total.duplicates_dropped} duplicates, {total.updates} updates, "
            f"{total.events_created} events created | space now {counts['facts']} facts, "
            f"{counts['events']} events, {counts['profiles']} profiles | "
            f"{seconds:.1f}s, {rate:.0f} facts/s"
        )
    seconds = time.perf_counter() - started
    if len(inputs) > 1:
        rate = grand.facts_in / seconds if seconds > 0 else 0.0
        print(f"total: {grand.facts_in} facts in {seconds:.1f}s ({rate:.0f} facts/s)")
    return 0


def _space(ctx: MemoryContext, tenant: str, space: str) -> None:
    records.require_space(ctx.store, tenant, space)


def cmd_facts(args: argparse.Namespace) -> int:
    ctx, tenant = _context(args)
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
    ctx, tenant = _context(args)
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


def print_profile(profile: Profile) -> None:
    print(f"* {profile.person}: {profile.content}  (since {profile.t_from})")
    for version in profile.history:
        print(f"    {version.t_from} .. {version.t_to}: {version.content}")


def cmd_profiles(args: argparse.Namespace) -> int:
    ctx, tenant = _context(args)
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


def _print_hits(result: object) -> None:
    from common.retrieval.flat import SearchResult

    assert isinstance(result, SearchResult)
    for rank, hit in enumerate(result.hits, 1):
        turns = ",".join(hit.fact.all_turn_ids())
        print(f"  {rank:2d}. {hit.score:.3f}  {hit.fact.text}  [{turns}]")
    for profile, version in result.profiles:
        print(f"  profile {profile.person}: {version.content} (from {version.t_from})")


def cmd_search(args: argparse.Namespace) -> int:
    from common.retrieval.flat import search

    ctx, tenant = _context(args)
    result = search(ctx, tenant, args.space, args.question, k=args.k)
    if args.json:
        print(
            json.dumps(
                [
                    {
                        "fact_id": h.fact.id,
                        "text": h.fact.text,
                        "score": h.score,
                        "turn_ids": h.fact.all_turn_ids(),
                    }
                    for h in result.hits
                ]
            )
        )
        return 0
    print(f"Q: {args.question}")
    _print_hits(result)
    return 0


def cmd_ask(args: argparse.Namespace) -> int:
    from common.retrieval.flat import ask

    ctx, tenant = _context(args)
    result = ask(ctx, tenant, args.space, args.question)
    print(f"Q: {args.question}\nA: {result.answer.text}")
    print("  evidence:")
    _print_hits(result.search)
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    ctx, tenant = _context(args)
    spaces = (
        [records.require_space(ctx.store, tenant, args.space)]
        if args.space
        else records.list_spaces(ctx.store, tenant)
    )
    print(f"{'space':<20} {'sessions':>8} {'facts':>7} {'events':>7} {'profiles':>8}")
    for sp in spaces:
        counts = [
            ctx.store.count(k, tenant, sp.space)
            for k in (Kind.SESSIONS, Kind.FACTS, Kind.EVENTS, Kind.PROFILES)
        ]
        print(f"{sp.space:<20} {counts[0]:>8} {counts[1]:>7} {counts[2]:>7} {counts[3]:>8}")
    return 0


def cmd_space(args: argparse.Namespace) -> int:
    ctx, tenant = _context(args)
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


DEMO_QUESTIONS = [
    "Where does Priya live?",
    "When did Tom adopt his puppy?",
    "What does Priya do for work?",
    "What hobby did Priya start in a class?",
    "Where did Priya go hiking in May 2024?",
    "What is Tom training for?",
]


def cmd_demo(args: argparse.Namespace) -> int:
    """Ingest the bundled sample conversation into a fresh store and answer from memory."""
    from common.memory.ingest import ingest_session
    from common.retrieval.flat import ask

    data_dir = Path(args.data_dir or ".atommem/demo")
    if data_dir.exists():
        shutil.rmtree(data_dir)
    args.data_dir = str(data_dir)
    sample = resources.files("workers").joinpath("samples/sample_conversation.json")
    with resources.as_file(sample) as path:
        data = read_sessions(Path(path))
    ctx, tenant = _context(args)
    space = data.space or "demo"
    records.create_space(ctx.store, tenant, space)
    print(f"== Ingesting {len(data.sessions)} sessions into space {space!r} (store: {data_dir})")
    for session in data.sessions:
        s = ingest_session(ctx, tenant, space, session).stats
        print(
            f"  {session.session_id} ({session.started_at:%Y-%m-%d}): {s.turns} turns -> "
            f"{s.facts_stored} facts stored, {s.duplicates_dropped} duplicates, "
            f"{s.updates} updates, "
            f"{s.events_created} events created, {s.profile_changes} profile changes"
        )
    index = ctx.index(tenant, space)
    print("\n== Facts")
    for fact in sorted(
        index.facts.items(), key=lambda f: (f.source.session_seq, f.source.positions)
    ):
        print(f"  - {fact.text}  [{','.join(fact.all_turn_ids())}]")
    print("\n== Events")
    for event in index.events.items():
        print(f"  * {event.summary}  ({len(event.fact_ids)} facts)")
    print("\n== Profiles (with earlier versions)")
    for profile in sorted(index.profiles.items(), key=lambda p: (p.person, p.t_from)):
        print_profile(profile)
    print("\n== Questions")
    for question in DEMO_QUESTIONS:
        result = ask(ctx, tenant, space, question)
        print(f"Q: {question}\nA: {result.answer.text}")
        for hit in result.search.hits[:3]:
            print(
                f"     evidence {hit.score:.3f}: {hit.fact.text} "
                f"[{','.join(hit.fact.all_turn_ids())}]"
            )
        for profile, version in result.search.profiles[:2]:
            print(f"     profile {profile.person} (valid from {version.t_from}): {version.content}")
    print(
        "\nThe offline `rules` backend answered extractively; configure an LLM backend for "
        "generated answers."
    )
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="atommem", description=__doc__)
    parser.add_argument(
        "--data-dir", help="store directory for Qdrant local mode (default from settings)"
    )
    parser.add_argument("--tenant", help="tenant (default from settings)")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser(
        "ingest", help="ingest session files (AtomMem JSON, LoCoMo, pre-extracted facts)"
    )
    p.add_argument("paths", nargs="+", help="files or directories of .json files")
    p.add_argument("--space", help="target space (default: the name the file gives)")
    p.add_argument(
        "--format", default="auto", choices=["auto", "session", "locomo", "locomo-facts"]
    )
    p.add_argument("--create-space", action="store_true", help="create the space if it is missing")
    p.set_defaults(func=cmd_ingest)

    for name, func, help_text in (
        ("facts", cmd_facts, "list a space's facts"),
        ("events", cmd_events, "list a space's events"),
        ("profiles", cmd_profiles, "list a space's profiles with their history"),
    ):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("--space", required=True)
        p.add_argument("--limit", type=int, default=1_000_000)
        p.add_argument("--json", action="store_true")
        p.set_defaults(func=func)

    p = sub.add_parser("search", help="ranked facts for a question")
    p.add_argument("--space", required=True)
    p.add_argument("--k", type=int, default=None)
    p.add_argument("--json", action="store_true")
    p.add_argument("question")
    p.set_defaults(func=cmd_search)

    p = sub.add_parser("ask", help="an answer from memory with its evidence")
    p.add_argument("--space", required=True)
    p.add_argument("question")
    p.set_defaults(func=cmd_ask)

    p = sub.add_parser("stats", help="counts per space")
    p.add_argument("--space")
    p.set_defaults(func=cmd_stats)

    p = sub.add_parser("space", help="create or list spaces")
    p.add_argument("action", choices=["create", "list"])
    p.add_argument("name", nargs="?")
    p.set_defaults(func=cmd_space)

    p = sub.add_parser("demo", help="ingest the bundled sample conversation and answer questions")
    p.set_defaults(func=cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except AtomMemError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(
            "interrupted: finished sessions are kept; run the same command to resume",
            file=sys.stderr,
        )
        return 130


if __name__ == "__main__":
    sys.exit(main())
