"""The `atommem` command: ingest sessions through the task graph, inspect memory, query.

With no broker configured everything runs in this process (an embedded worker over an
in-memory broker); with `ATOMMEM_BROKER__URL` set, sessions go to the Redis queues and the
command waits for the workers.
"""

from __future__ import annotations

import argparse
import atexit
import shlex
import shutil
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from tqdm import tqdm

from common.celery_config import celery_config
from common.errors import AtomMemError, InvalidInput
from common.inputs.formats import SpaceInput, read_sessions
from common.llm import usage
from common.memory.changes import CommitStats
from common.memory.context import MemoryContext
from common.models.memory import Profile
from common.settings import Settings, get_settings
from common.store import records
from common.store.qdrant import Kind
from workers import runtime


def _settings(args: argparse.Namespace) -> Settings:
    settings: Settings = get_settings()
    if args.data_dir:
        root = Path(args.data_dir)
        store = settings.store.model_copy(update={"qdrant_path": root / "qdrant"})
        pipeline = settings.pipeline.model_copy(
            update={"coordination_path": root / "coordination.sqlite"}
        )
        settings = settings.model_copy(update={"store": store, "pipeline": pipeline})
    return settings


def _setup(args: argparse.Namespace) -> str:
    settings = _settings(args)
    runtime.configure(settings)
    atexit.register(runtime.reset)
    return str(args.tenant or settings.tenant)


def _context() -> MemoryContext:
    """The store, opened by this process (embedded mode, or a Qdrant server)."""
    settings = runtime.settings()
    try:
        return runtime.context()
    except RuntimeError as exc:
        if "already accessed by another instance" in str(exc):
            raise AtomMemError(
                f"the store at {settings.store.qdrant_path} is open in another process (a "
                "worker?); Qdrant local mode allows one process: use a Qdrant server URL"
            ) from None
        raise


def _store_reachable() -> bool:
    """Whether this command may open the store itself (not while workers own a local one)."""
    settings = runtime.settings()
    return settings.broker.url is None or settings.store.qdrant_url is not None


def _client() -> Any:
    """A producer client; in embedded mode, also the in-process worker (resuming the journal)."""
    from workers.celery_app import app
    from workers.client import MemoryClient

    if runtime.settings().broker.url is None:
        from workers.embedded import EmbeddedWorker

        worker = EmbeddedWorker()
        worker.start()
        atexit.register(worker.stop)
        return MemoryClient(app, runtime.coordinator())
    app.conf.update(celery_config(runtime.settings()))
    return MemoryClient(app, runtime.coordinator())


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
    tenant = _setup(args)
    batches: list[tuple[str, SpaceInput]] = []
    for path, data in inputs:
        space = args.space or data.space
        if not space:
            raise InvalidInput(f"{path}: the file names no space; pass --space")
        batches.append((space, data))
    if _store_reachable():
        ctx = _context()
        for space, _ in batches:
            if args.create_space:
                records.create_space(ctx.store, tenant, space, exist_ok=True)
            else:
                records.require_space(ctx.store, tenant, space)
        ctx.embedder.encode([])  # load the model before the clock starts: rates measure ingest
    elif args.create_space:
        raise InvalidInput("--create-space needs the store: create spaces through a worker")
    client = _client()
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


def _resume_open(client: Any) -> list[Any]:
    """In embedded mode, send again the jobs an interrupted run left unfinished."""
    if runtime.settings().broker.url is not None:
        return []
    jobs = client.resend_open()
    if jobs:
        print(f"resuming {len(jobs)} unfinished jobs of an interrupted run", file=sys.stderr)
    return list(jobs)


def cmd_resume(args: argparse.Namespace) -> int:
    """Finish what an interrupted embedded run left: its journaled, unfinished jobs."""
    tenant = _setup(args)
    if runtime.settings().broker.url is not None:
        raise InvalidInput("resume is for embedded runs; with a broker the queues keep the work")
    if _store_reachable():
        _context().embedder.encode([])
    client = _client()
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


def _report(tenant: str, finished: list[Any], seconds: float) -> int:
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
        if _store_reachable():
            ctx = _context()
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
    tenant = _setup(args)
    ctx = _context()
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
    tenant = _setup(args)
    ctx = _context()
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
    tenant = _setup(args)
    ctx = _context()
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


def print_hits(result: dict[str, Any], limit: int | None = None) -> None:
    for rank, hit in enumerate(result["hits"][:limit], 1):
        print(f"  {rank:2d}. {hit['score']:.3f}  {hit['text']}  [{','.join(hit['turn_ids'])}]")
    for profile in result["profiles"][:limit]:
        since = profile["valid_from"]
        print(f"  profile {profile['person']} (valid from {since}): {profile['content']}")


def cmd_search(args: argparse.Namespace) -> int:
    tenant = _setup(args)
    return show_search(args, _client().search(tenant, args.space, args.question, k=args.k))


def show_search(args: argparse.Namespace, result: dict[str, Any]) -> int:
    if args.json:
        import json

        print(json.dumps(result["hits"]))
        return 0
    print(f"Q: {args.question}")
    print_hits(result)
    return 0


def cmd_ask(args: argparse.Namespace) -> int:
    tenant = _setup(args)
    return show_answer(args, _client().ask(tenant, args.space, args.question))


def show_answer(args: argparse.Namespace, result: dict[str, Any]) -> int:
    print(f"Q: {args.question}\nA: {result['answer']}")
    line = usage_line(result.get("llm_usage", {}))
    if line:
        print(f"  ({line})")
    print("  evidence:")
    print_hits(result)
    return 0


def usage_line(counts: dict[str, int]) -> str:
    """`llm: 12 calls (3 skipped), 4,210 prompt + 512 completion tokens`, or "" when none."""
    spent = usage.Usage.from_counts(counts)
    if not spent.total("calls"):
        return ""  # the `rules` backend: no model calls to report
    return (
        f"llm: {spent.total('calls')} calls ({spent.total('skipped')} skipped), "
        f"{spent.total('prompt_tokens'):,} prompt + "
        f"{spent.total('completion_tokens'):,} completion tokens"
    )


def cmd_delete(args: argparse.Namespace) -> int:
    """Erase a fact, a session's contribution, or a whole space, from every store."""
    import json

    tenant = _setup(args)
    client = _client()
    if args.everything:
        erased = client.admin(tenant, args.space, "erase_space")
    elif args.fact:
        erased = client.admin(tenant, args.space, "erase_fact", args.fact)
    else:
        erased = client.admin(tenant, args.space, "erase_session", args.session)
    print(json.dumps(erased["erased"], indent=2))
    return 0


def _remote(args: argparse.Namespace) -> int:
    """The command against the server named by ATOMMEM_API__URL, through the SDK."""
    from workers import remote

    name = args.func.__name__.removeprefix("cmd_").replace("_", "-")
    if name not in remote.COMMANDS:
        raise InvalidInput(
            f"`atommem {name}` runs against the store or queues, not a server: "
            "unset ATOMMEM_API__URL"
        )
    with remote.client(get_settings()) as mem:
        return remote.COMMANDS[name](mem, args)


def cmd_profile_batch(args: argparse.Namespace) -> int:
    """Send an on-demand profile batch for a space."""
    tenant = _setup(args)
    client = _client()
    client.flush_profiles(tenant, args.space)
    print(f"profile batch done for space {args.space!r}")
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    tenant = _setup(args)
    ctx = _context()
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
    tenant = _setup(args)
    ctx = _context()
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
    tenant = _setup(args)
    client = _client()
    job = (
        client.retry(tenant, args.job_id)
        if args.action == "retry"
        else client.job(tenant, args.job_id)
    )
    if args.action == "retry":
        job = client.wait(tenant, [job.job_id])[0]
    print(job.model_dump_json(indent=2))
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
    data_dir = Path(args.data_dir or ".atommem/demo")
    if data_dir.exists():
        shutil.rmtree(data_dir)
    args.data_dir = str(data_dir)
    sample = resources.files("workers").joinpath("samples/sample_conversation.json")
    with resources.as_file(sample) as path:
        data = read_sessions(Path(path))
    tenant = _setup(args)
    if runtime.settings().broker.url is not None:
        raise InvalidInput("the demo runs on embedded defaults: unset ATOMMEM_BROKER__URL")
    ctx = _context()
    space = data.space or "demo"
    records.create_space(ctx.store, tenant, space)
    client = _client()
    print(f"== Ingesting {len(data.sessions)} sessions into space {space!r} (store: {data_dir})")
    jobs = client.submit(tenant, space, data.sessions)
    for session, job in zip(
        data.sessions, client.wait(tenant, [j.job_id for j in jobs]), strict=True
    ):
        s = CommitStats.model_validate(job.counts)
        print(
            f"  {session.session_id} ({session.started_at:%Y-%m-%d}) job {job.state}: "
            f"{s.turns} turns -> {s.facts_stored} facts stored, {s.duplicates_dropped} "
            f"duplicates, {s.updates} updates, {s.events_created} events created, "
            f"{s.profile_changes} profile changes"
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
        result = client.ask(tenant, space, question)
        print(f"Q: {question}\nA: {result['answer']}")
        for hit in result["hits"][:3]:
            print(f"     evidence {hit['score']:.3f}: {hit['text']} [{','.join(hit['turn_ids'])}]")
        for profile in result["profiles"][:2]:
            print(
                f"     profile {profile['person']} (valid from {profile['valid_from']}): "
                f"{profile['content']}"
            )
    print(
        "\nThe offline `rules` backend answered extractively; configure an LLM backend for "
        "generated answers."
    )
    return 0


def _bench_setup(args: argparse.Namespace) -> tuple[str, MemoryContext]:
    """Tenant and store for a benchmark: a throwaway data dir unless one is given, the store
    reachable from here (spaces are created and counted), the model loaded before any clock."""
    import tempfile

    if not args.data_dir:
        args.data_dir = tempfile.mkdtemp(prefix="atommem-bench-")
        atexit.register(shutil.rmtree, args.data_dir, True)
    tenant = _setup(args)
    if not _store_reachable():
        raise InvalidInput(
            "the benchmark creates spaces and counts memory, so it needs the store: run it "
            "embedded, or with a Qdrant server URL next to the broker"
        )
    ctx = _context()
    ctx.embedder.encode([])
    return tenant, ctx


def cmd_bench_locomo(args: argparse.Namespace) -> int:
    """Build one memory per conversation, ask every question per variant, write the results."""
    import json

    from workers.bench import locomo

    variants = locomo.check_variants(args.variant)
    facts = Path(args.facts) if args.facts else None
    conversations = locomo.load_conversations(Path(args.conversations), facts)
    many = len(variants) > 1
    out = Path(args.out)
    if many and out.suffix == ".json":
        raise InvalidInput("--out names a directory when several variants run")
    if args.reuse and not args.data_dir and get_settings().store.qdrant_url is None:
        raise InvalidInput("--reuse queries spaces built before: pass the --data-dir holding them")
    if args.judge and not args.answer:
        raise InvalidInput("--judge grades answers: add --answer")
    if args.judge and get_settings().llm.backend == "rules":
        raise InvalidInput("--judge needs an LLM backend (ATOMMEM_LLM__BACKEND=openai)")
    tenant, ctx = _bench_setup(args)
    judge = getattr(ctx.backend, "judge", None) if args.judge else None
    settings = runtime.settings()
    ingest_stats = None
    memory_variants = [v for v in variants if v in locomo.MEMORY_VARIANTS]
    client = _client() if memory_variants else None
    if memory_variants:
        if args.reuse:
            ingest_stats = locomo.counts(ctx.store, tenant, conversations, None)
        else:
            ingest_stats = locomo.ingest(client, ctx.store, tenant, conversations, args.quiet)
            print(
                f"ingest: {ingest_stats['facts']} facts, {ingest_stats['events']} events, "
                f"{ingest_stats['profiles']} profiles in {ingest_stats['seconds']} s "
                f"({ingest_stats['facts_per_s']} facts/s)",
                file=sys.stderr,
            )
        for conv in conversations[:1]:  # warm the query worker and the space index
            for _, qa in conv.questions[:5]:
                client.search(tenant, conv.name, qa["question"])
    command = "atommem " + shlex.join(sys.argv[1:])
    used = {
        "similarity": settings.similarity.model_dump(),
        "retrieval": settings.retrieval.model_dump(),
        "graph": settings.graph.model_dump(),
        "llm_backend": settings.llm.backend,
        "embedding_model": str(settings.embedding.model_path),
    }
    print(f"{'variant':<11} " + " ".join(f"{c:>11}" for c in (*CATEGORY_NAMES, "overall")))
    for variant in variants:
        if variant == "raw-turns":
            rows, stages = locomo.run_raw_turns(
                ctx.embedder.encode, conversations, args.k, args.quiet
            )
            doc = locomo.result_document(variant, args.k, command, rows, stages, None, used)
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


def _cell(value: float | None) -> str:
    return f"{value:>11.2f}" if value is not None else f"{'-':>11}"


def cmd_bench_scale(args: argparse.Namespace) -> int:
    """Synthetic spaces of growing size: ingest rate and query latency at each."""
    import json

    from workers.bench import scale

    sizes = sorted(set(args.sizes))
    if not sizes or sizes[0] < scale.FACTS_PER_TURN or args.queries < 1:
        raise InvalidInput("--sizes must be positive fact counts and --queries at least 1")
    tenant, ctx = _bench_setup(args)
    client = _client()
    rows = []
    out = Path(args.out)
    for size in sizes:
        row = scale.run_size(client, ctx.store, tenant, size, args.queries, args.seed, args.quiet)
        rows.append(row)
        lat = row["latency_ms"]
        print(
            f"{size:>8} facts: ingest {row['facts_per_s']:.1f} facts/s, query p50 "
            f"{lat['through_query_worker']['p50']:.1f} ms p95 "
            f"{lat['through_query_worker']['p95']:.1f} ms, graph p50 {lat['graph']['p50']:.1f} ms"
        )
        doc = {
            "benchmark": "scale",
            "command": "atommem " + shlex.join(sys.argv[1:]),
            "broker": "embedded" if runtime.settings().broker.url is None else "redis",
            "sizes": rows,
            "growth": scale.growth(rows),
        }
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")  # after every size
    print(f"results: {out}", file=sys.stderr)
    return 0


def cmd_bench_report(args: argparse.Namespace) -> int:
    from common.bench.report import write_report

    paths: list[Path] = []
    for raw in args.results:
        path = Path(raw)
        paths.extend(sorted(path.glob("*.json")) if path.is_dir() else [path])
    if not paths:
        raise InvalidInput("no result files given")
    markdown, plot = write_report(paths, Path(args.out))
    print(f"wrote {markdown} and {plot}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="atommem", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data-dir", help="directory for the local store and job journal")
    parser.add_argument("--tenant", help="tenant (default from settings)")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("ingest", help="ingest session files (session JSON, LoCoMo, pre-extracted)")
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

    p = sub.add_parser("search", help="ranked facts for a question (query queue)")
    p.add_argument("--space", required=True)
    p.add_argument("--k", type=int, default=None)
    p.add_argument("--json", action="store_true")
    p.add_argument("question")
    p.set_defaults(func=cmd_search)

    p = sub.add_parser("ask", help="an answer from memory with its evidence (query queue)")
    p.add_argument("--space", required=True)
    p.add_argument("question")
    p.set_defaults(func=cmd_ask)

    p = sub.add_parser("profile-batch", help="run the profile batch of a space now")
    p.add_argument("--space", required=True)
    p.set_defaults(func=cmd_profile_batch)

    p = sub.add_parser("stats", help="counts per space")
    p.add_argument("--space")
    p.set_defaults(func=cmd_stats)

    p = sub.add_parser("space", help="create or list spaces")
    p.add_argument("action", choices=["create", "list"])
    p.add_argument("name", nargs="?")
    p.set_defaults(func=cmd_space)

    p = sub.add_parser("job", help="show a job's state, or retry a failed one")
    p.add_argument("action", choices=["show", "retry"])
    p.add_argument("job_id")
    p.set_defaults(func=cmd_job)

    p = sub.add_parser("delete", help="erase a fact, a session or a whole space everywhere")
    p.add_argument("--space", required=True)
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--fact", help="a fact id")
    target.add_argument("--session", help="a session id: its contribution to the space")
    target.add_argument("--everything", action="store_true", help="the space itself")
    p.set_defaults(func=cmd_delete)

    p = sub.add_parser("resume", help="finish the jobs an interrupted embedded run left")
    p.set_defaults(func=cmd_resume)

    p = sub.add_parser("demo", help="ingest the bundled sample conversation and answer questions")
    p.set_defaults(func=cmd_demo)

    bench = sub.add_parser("bench", help="benchmarks: LoCoMo recall, report").add_subparsers(
        dest="bench", required=True
    )
    p = bench.add_parser(
        "locomo", help="Recall@k by category per variant on LoCoMo-format conversations"
    )
    p.add_argument("--conversations", required=True, help="a LoCoMo .json file or a directory")
    p.add_argument("--facts", help="directory of pre-extracted facts with the same file names")
    p.add_argument(
        "--variant",
        action="append",
        default=[],
        help="full, flat, no-graph, no-profile, raw-turns or all (repeatable; default all)",
    )
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--answer", action="store_true", help="also answer and score F1 and BLEU-1")
    p.add_argument(
        "--judge", action="store_true", help="with --answer and an LLM backend: LLM judge (J)"
    )
    p.add_argument("--reuse", action="store_true", help="query the spaces already in --data-dir")
    p.add_argument("--out", required=True, help="result file (one variant) or directory (several)")
    p.set_defaults(func=cmd_bench_locomo)
    p = bench.add_parser("scale", help="ingest rate and query latency on growing synthetic spaces")
    p.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    p.add_argument("--queries", type=int, default=200, help="questions per size")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--out", required=True, help="result file (rewritten after every size)")
    p.set_defaults(func=cmd_bench_scale)
    p = bench.add_parser("report", help="markdown table and PNG plot from result files")
    p.add_argument("results", nargs="+", help="result files or directories of them")
    p.add_argument("--out", required=True, help="directory for report.md and the plot")
    p.set_defaults(func=cmd_bench_report)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if get_settings().api.url:
            return _remote(args)
        return int(args.func(args))
    except AtomMemError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: run the same command again to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
