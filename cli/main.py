"""The `atommem` command: ingest sessions through the task graph, inspect memory, query.

With no broker configured everything runs in this process (an embedded worker over an
in-memory broker); with `ATOMMEM_BROKER__URL` set, sessions go to the Redis queues and the
command waits for the workers. With `ATOMMEM_API__URL` set, the same commands go to that
server through the SDK (those that need this machine's store or queues say so).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from importlib import import_module, metadata

from common.errors import AtomMemError


def command(module: str, name: str) -> Callable[[argparse.Namespace], int]:
    """A command's function, imported when it runs: `--help` and `--version` load none of the
    workers, the store or Celery."""

    def run(args: argparse.Namespace) -> int:
        func: Callable[[argparse.Namespace], int] = getattr(import_module(module), name)
        return func(args)

    return run


cmd_bench_extract = command("cli.bench", "cmd_bench_extract")
cmd_bench_locomo = command("cli.bench", "cmd_bench_locomo")
cmd_bench_longmemeval = command("cli.bench", "cmd_bench_longmemeval")
cmd_bench_report = command("cli.bench", "cmd_bench_report")
cmd_bench_scale = command("cli.bench", "cmd_bench_scale")
cmd_ask = command("cli.commands", "cmd_ask")
cmd_correct = command("cli.commands", "cmd_correct")
cmd_delete = command("cli.commands", "cmd_delete")
cmd_events = command("cli.commands", "cmd_events")
cmd_facts = command("cli.commands", "cmd_facts")
cmd_ingest = command("cli.commands", "cmd_ingest")
cmd_job = command("cli.commands", "cmd_job")
cmd_profile_batch = command("cli.commands", "cmd_profile_batch")
cmd_profiles = command("cli.commands", "cmd_profiles")
cmd_resume = command("cli.commands", "cmd_resume")
cmd_search = command("cli.commands", "cmd_search")
cmd_space = command("cli.commands", "cmd_space")
cmd_stats = command("cli.commands", "cmd_stats")
cmd_demo = command("cli.demo", "cmd_demo")
cmd_executor_export = command("cli.executor", "cmd_executor_export")
cmd_executor_teach = command("cli.executor", "cmd_executor_teach")
cmd_executor_train = command("cli.executor", "cmd_executor_train")
cmd_mcp = command("cli.mcp", "cmd_mcp")
cmd_space_compare = command("cli.rebuild", "cmd_space_compare")
cmd_space_rebuild = command("cli.rebuild", "cmd_space_rebuild")
cmd_serve = command("cli.serve", "cmd_serve")
cmd_space_pull = command("cli.transfer", "cmd_space_pull")
cmd_space_push = command("cli.transfer", "cmd_space_push")


def _version() -> str:
    try:
        return metadata.version("atommem")
    except metadata.PackageNotFoundError:  # run from a clone that was never installed
        return "(not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="atommem", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data-dir", help="directory for the local store and job journal")
    parser.add_argument("--tenant", help="tenant (default from settings)")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    parser.add_argument("--version", action="version", version=f"atommem {_version()}")
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

    _query_and_admin_commands(sub)
    p = sub.add_parser("resume", help="finish the jobs an interrupted embedded run left")
    p.set_defaults(func=cmd_resume)

    p = sub.add_parser("demo", help="ingest the bundled sample conversation and answer questions")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("mcp", help="serve memory to MCP clients on stdio (docs/mcp.md)")
    p.set_defaults(func=cmd_mcp)

    p = sub.add_parser(
        "serve",
        help="the HTTP API, /mcp and /ui over the embedded store, in one process (no Redis)",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    p.add_argument("--port", type=int, default=8080, help="port (8080)")
    p.set_defaults(func=cmd_serve)

    _executor_commands(sub)
    _bench_commands(sub)
    return parser


def _query_and_admin_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """search, ask, profile-batch, stats, space, job, delete, correct."""
    p = sub.add_parser("search", help="ranked facts for a question (query queue)")
    p.add_argument("--space", required=True)
    p.add_argument("--k", type=int, default=None)
    p.add_argument("--json", action="store_true")
    p.add_argument("question")
    p.set_defaults(func=cmd_search)

    p = sub.add_parser("ask", help="an answer from memory with its evidence (query queue)")
    p.add_argument("--space", required=True)
    p.add_argument("--json", action="store_true")
    p.add_argument("question")
    p.set_defaults(func=cmd_ask)

    p = sub.add_parser("profile-batch", help="run the profile batch of a space now")
    p.add_argument("--space", required=True)
    p.set_defaults(func=cmd_profile_batch)

    p = sub.add_parser("stats", help="counts per space")
    p.add_argument("--space")
    p.set_defaults(func=cmd_stats)

    _space_commands(sub)

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

    p = sub.add_parser("correct", help="correct a fact's text (verified; the old text kept)")
    p.add_argument("--space", required=True)
    p.add_argument("--fact", required=True, help="a fact id")
    p.add_argument("--reason", help="why, kept in the fact's history")
    p.add_argument("text", help="the fact as it should read")
    p.set_defaults(func=cmd_correct)


def _space_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """space create, list, push, pull, rebuild, compare."""
    space = sub.add_parser(
        "space", help="create or list spaces, or copy one to or from another store"
    ).add_subparsers(dest="action", required=True)
    p = space.add_parser("create", help="create a space")
    p.add_argument("name")
    p.set_defaults(func=cmd_space)
    p = space.add_parser("list", help="list the tenant's spaces")
    p.set_defaults(func=cmd_space, name=None)
    where = "a Qdrant server (http:// or https:// URL) or a data directory"
    for name, func, flag, dest, help_text in (
        ("push", cmd_space_push, "--to", "to", "copy a space from this store to another"),
        ("pull", cmd_space_pull, "--from", "source", "copy a space from another store here"),
    ):
        p = space.add_parser(name, help=help_text)
        p.add_argument("space", metavar="SPACE")
        p.add_argument(flag, dest=dest, required=True, metavar="URL_OR_DIR", help=where)
        p.add_argument(
            "--replace", action="store_true", help="delete the space at the target first"
        )
        p.add_argument(
            "--api-key", help="the server's API key (default ATOMMEM_STORE__QDRANT_API_KEY)"
        )
        p.set_defaults(func=func)
    p = space.add_parser(
        "rebuild", help="re-run a space's stored sessions through the current configuration"
    )
    p.add_argument("space", metavar="SPACE")
    p.add_argument("--into", required=True, metavar="NEW_SPACE", help="a new or empty space")
    p.set_defaults(func=cmd_space_rebuild)
    p = space.add_parser("compare", help="two spaces side by side (e.g. a rebuild and its source)")
    p.add_argument("a", metavar="A")
    p.add_argument("b", metavar="B")
    p.add_argument("--show", type=int, default=10, help="facts only in one space shown (10)")
    p.add_argument("--questions", help="a LoCoMo-format file: Recall@k and query p50 of both")
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_space_compare)


def _answer_options(p: argparse.ArgumentParser, answer_help: str) -> None:
    """--answer, --judge and --reuse of the recall benchmarks."""
    p.add_argument("--answer", action="store_true", help=answer_help)
    p.add_argument(
        "--judge", action="store_true", help="with --answer and an LLM backend: LLM judge (J)"
    )
    p.add_argument("--reuse", action="store_true", help="query the spaces already in --data-dir")


def _executor_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """executor teach, export, train."""
    executor = sub.add_parser(
        "executor", help="fine-tune the Fact Executor: teach, (review in /ui), export, train"
    ).add_subparsers(dest="action", required=True)
    where = "the samples file (default: executor.samples_path, under --data-dir when given)"
    p = executor.add_parser(
        "teach", help="a teacher model's facts for the sessions of a space or file, as samples"
    )
    p.add_argument("inputs", nargs="+", metavar="SPACE|FILE", help="spaces, files or directories")
    p.add_argument("--teacher", metavar="URL", help="an OpenAI-compatible endpoint's base URL")
    p.add_argument("--model", help="the teacher's model name (executor.teacher.model)")
    p.add_argument("--samples", help=where)
    p.add_argument("--format", default="auto", choices=["auto", "session", "locomo"])
    p.add_argument("--max-samples", type=int, help="stop after this many new samples")
    p.add_argument("--budget-tokens", type=int, help="stop once the teacher spent this many tokens")
    p.set_defaults(func=cmd_executor_teach)
    p = executor.add_parser(
        "export", help="reviewed samples as a chat-format SFT dataset, split by conversation"
    )
    p.add_argument("--samples", help=where)
    p.add_argument("--out", required=True, help="directory for train/validation.jsonl, stats")
    p.add_argument("--validation", type=float, default=0.1, help="conversations held out (0.1)")
    p.add_argument("--seed", default="atommem", help="the split's seed")
    p.add_argument("--json", action="store_true", help="the statistics as JSON")
    p.set_defaults(func=cmd_executor_export)
    p = executor.add_parser(
        "train", help="LoRA SFT of a local causal LM on an exported dataset (needs [executor])"
    )
    p.add_argument("--model", required=True, help="a local model directory (or a cached hub id)")
    p.add_argument("--data", required=True, help="the export's directory")
    p.add_argument("--out", required=True, help="checkpoints and the final adapter")
    p.add_argument("--rank", type=int, default=128, help="LoRA rank (the paper's 128)")
    p.add_argument("--alpha", type=int, default=256, help="LoRA alpha (256)")
    p.add_argument("--lr", type=float, default=5e-5, help="learning rate (the paper's 5e-5)")
    p.add_argument("--batch-size", type=int, default=1, help="per device (1)")
    p.add_argument("--grad-accum", type=int, default=8, help="steps per update: effective batch 8")
    p.add_argument("--epochs", type=float, default=3.0, help="the paper's 3")
    p.add_argument("--max-length", type=int, default=4096, help="tokens per example")
    p.add_argument("--save-steps", type=int, default=100, help="a checkpoint every N updates")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument(
        "--gradient-checkpointing", action="store_true", help="less GPU memory, ~30%% slower"
    )
    p.add_argument("--restart", action="store_true", help="ignore existing checkpoints")
    p.set_defaults(func=cmd_executor_train)


def _bench_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """bench locomo, bench longmemeval, bench extract, bench scale, bench report."""
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
        help="full, flat, no-graph, no-profile, hybrid-bm25, raw-turns or all (repeatable; "
        "default all)",
    )
    p.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="NAME",
        help="only the conversation of this file stem, e.g. conv-26 (repeatable): a fold",
    )
    p.add_argument("--k", type=int, default=10)
    _answer_options(p, "also answer and score F1 and BLEU-1")
    p.add_argument("--out", required=True, help="result file (one variant) or directory (several)")
    p.set_defaults(func=cmd_bench_locomo)
    p = bench.add_parser(
        "longmemeval",
        help="LongMemEval's session- and turn-level retrieval scores per question type",
    )
    p.add_argument(
        "--data",
        required=True,
        metavar="FILE",
        help="an official file: longmemeval_oracle.json, longmemeval_s.json or longmemeval_m.json",
    )
    p.add_argument("--variant", default="full", help="full (default), flat, no-graph or no-profile")
    p.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="QUESTION_ID",
        help="only this question (repeatable)",
    )
    p.add_argument("--limit", type=int, help="only the first N questions (after --only)")
    p.add_argument(
        "--k", type=int, default=50, help="facts retrieved per question, ranked into sessions (50)"
    )
    _answer_options(p, "also answer and score F1")
    p.add_argument("--out", required=True, help="result file")
    p.set_defaults(func=cmd_bench_longmemeval)
    p = bench.add_parser(
        "extract",
        help="the extractor's facts against the authors' pre-extracted facts, turn by turn",
    )
    p.add_argument("--conversations", required=True, help="a LoCoMo .json file or a directory")
    p.add_argument(
        "--facts", required=True, help="directory of the authors' facts with the same file names"
    )
    p.add_argument("--only", action="append", default=[], metavar="NAME", help="as bench locomo")
    p.add_argument(
        "--threshold", type=float, help="cosine a matched pair needs (default: bench/README.md's)"
    )
    p.add_argument("--window", type=int, help="turns a matched pair may lie apart (default 0)")
    p.add_argument(
        "--recall-dialogue",
        metavar="FILE",
        help="a bench locomo result of this extractor from the dialogue, for the downstream "
        "Recall@10 (default: the committed one of rules)",
    )
    p.add_argument(
        "--recall-facts",
        metavar="FILE",
        help="a bench locomo result from the authors' facts (default: the committed one)",
    )
    p.add_argument(
        "--labels", metavar="FILE", help="hand-labelled pairs the threshold was chosen from"
    )
    p.add_argument("--out", required=True, help="result file")
    p.set_defaults(func=cmd_bench_extract)
    p = bench.add_parser("scale", help="ingest rate and query latency on growing synthetic spaces")
    p.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    p.add_argument("--queries", type=int, default=200, help="questions per size")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--out", required=True, help="result file (rewritten after every size)")
    p.set_defaults(func=cmd_bench_scale)
    p = bench.add_parser("report", help="markdown table and PNG plot from result files")
    p.add_argument("results", nargs="+", help="result files or directories of them")
    p.add_argument("--out", required=True, help="directory for report.md and the plot")
    p.add_argument(
        "--fold",
        action="append",
        default=[],
        metavar="NAME=CONV,CONV",
        help="also the recall on these conversations alone (repeatable), e.g. A=conv-26,conv-41",
    )
    p.set_defaults(func=cmd_bench_report)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from celery.exceptions import TimeoutError as CeleryTimeout

    try:
        return int(args.func(args))
    except AtomMemError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (TimeoutError, CeleryTimeout):
        print("error: no worker answered in time; check that workers run", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: run the same command again to resume", file=sys.stderr)
        return 130
