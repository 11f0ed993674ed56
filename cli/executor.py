"""`atommem executor`: the Fact Executor's SFT pipeline, teach -> review -> export -> train
(docs/llm.md, "Training the Fact Executor"); the review happens in the inspector."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tqdm import tqdm

from cli.commands import _inputs
from cli.context import context, settings_from, setup, store_reachable
from common.errors import InvalidInput
from common.executor import dataset, review
from common.executor.samples import Source, read_samples
from common.executor.teach import Budget, Taught, Teacher, conversation_windows, teach
from common.llm.contracts import ExtractionWindow
from common.llm.openai_compat import OpenAITransport
from common.settings import LLMEndpoint, Settings
from common.store import records


def samples_file(args: argparse.Namespace, settings: Settings) -> Path:
    return Path(args.samples) if args.samples else settings.executor.samples_path


def _teacher(args: argparse.Namespace, settings: Settings) -> Teacher:
    endpoint = settings.executor.teacher
    url = args.teacher or endpoint.base_url
    if not url:
        raise InvalidInput(
            "no teacher: pass --teacher URL, any OpenAI-compatible endpoint (e.g. "
            "http://127.0.0.1:8000/v1), or set ATOMMEM_EXECUTOR__TEACHER__BASE_URL"
        )
    if not url.startswith(("http://", "https://")):
        raise InvalidInput(f"--teacher {url!r}: expected an http:// or https:// URL")
    update: dict[str, object] = {"base_url": url}
    if args.model:
        update["model"] = args.model
    endpoint = LLMEndpoint.model_validate(endpoint.model_dump() | update)
    # The teacher's own retries stay off (one layer: a failed window waits for the next run).
    llm = settings.llm.model_copy(update={"max_attempts": 1})
    transport = OpenAITransport(endpoint, llm, "teacher")
    return Teacher(transport=transport, model=endpoint.model, url=url)


def _sources(
    args: argparse.Namespace, settings: Settings
) -> list[tuple[Source, str, list[ExtractionWindow]]]:
    """(source, conversation, windows) per input: a sessions file (or a directory of them),
    or else the stored sessions of a space."""
    k = settings.memory.context_window_k
    out = []
    for raw in args.inputs:
        if Path(raw).exists():
            for path, data in _inputs([raw], args.format):
                conversation = data.space or path.stem
                todo = conversation_windows(data.sessions, k)
                out.append((Source(kind="file", name=path.name), conversation, todo))
            continue
        tenant = setup(args)
        if not store_reachable():
            raise InvalidInput(
                f"{raw!r} is no file, so it names a space, and reading a space's sessions "
                "needs the store: run embedded, or with a Qdrant server URL"
            )
        store = context().store
        if records.get_space(store, tenant, raw) is None:
            raise InvalidInput(f"{raw!r}: no such file, and no such space for tenant {tenant!r}")
        sessions = [r.session for r in records.list_sessions(store, tenant, raw)]
        if not sessions:
            raise InvalidInput(f"space {raw!r} holds no stored session to teach from")
        out.append((Source(kind="space", name=raw), raw, conversation_windows(sessions, k)))
    return out


def _taught_line(taught: Taught) -> str:
    return (
        f"{taught.written} samples written, {taught.already} there before, {taught.left} "
        f"left, {taught.tokens} teacher tokens"
    )


def cmd_executor_teach(args: argparse.Namespace) -> int:
    """A teacher's facts for every window of the inputs, appended to the samples file;
    running it again resumes."""
    settings = settings_from(args)
    out = samples_file(args, settings)
    teacher = _teacher(args, settings)
    tenant = str(args.tenant or settings.tenant)
    sources = _sources(args, settings)
    total = sum(len(todo) for _, _, todo in sources)
    budget = Budget(samples=args.max_samples, tokens=args.budget_tokens)
    done = Taught()
    bar = tqdm(total=total, desc="windows", unit="window", disable=args.quiet)
    try:
        for source, conversation, todo in sources:
            left = None if budget.samples is None else budget.samples - done.written
            tokens = None if budget.tokens is None else budget.tokens - done.tokens
            taught = teach(
                tenant,
                source,
                conversation,
                todo,
                teacher,
                out,
                max_tokens=settings.llm.max_tokens,
                batch=settings.llm.concurrency,
                budget=Budget(samples=left, tokens=tokens),
                progress=bar.update,
            )
            for name in ("windows", "already", "written", "failed", "tokens"):
                setattr(done, name, getattr(done, name) + getattr(taught, name))
            done.errors += taught.errors
            if taught.stopped or taught.budget_reached:
                done.stopped, done.budget_reached = taught.stopped, taught.budget_reached
                break
    finally:
        bar.close()
    done.windows = total
    for error in done.errors[:5]:
        print(f"skipped: {error}", file=sys.stderr)
    print(f"{out}: {_taught_line(done)}", file=sys.stderr)
    if done.stopped:
        raise InvalidInput(
            f"the teacher at {teacher.url} failed: {done.stopped}. {_taught_line(done)}; "
            "run the same command again to resume"
        )
    if done.budget_reached:
        print(
            "budget reached: run the same command again (with a new --max-samples or "
            "--budget-tokens) to resume",
            file=sys.stderr,
        )
    elif done.failed:
        print(
            f"{done.failed} windows got no usable answer: run the same command again to retry",
            file=sys.stderr,
        )
    return 0


def cmd_executor_export(args: argparse.Namespace) -> int:
    """The reviewed samples as train.jsonl and validation.jsonl (split by conversation)
    and stats.json in --out."""
    settings = settings_from(args)
    path = samples_file(args, settings)
    samples = read_samples(path)
    if not samples:
        raise InvalidInput(f"{path}: no samples (run `atommem executor teach` first)")
    last, logged = review.latest(path)
    splits, stats = dataset.build(samples, last, logged, args.validation, args.seed)
    dataset.write(Path(args.out), splits, stats)
    if args.json:
        print(stats.model_dump_json(indent=1))
    else:
        for name, split in stats.splits.items():
            print(
                f"{name:<10} {split.samples:>6} samples {len(split.conversations):>4} "
                f"conversations {split.facts:>6} facts ({split.empty} with none)"
            )
        counts = ", ".join(f"{n} {a}" for a, n in stats.review.actions.items())
        print(
            f"review: {stats.review.reviewed} of {stats.review.samples} samples "
            f"({stats.review.excluded} excluded, {stats.unreviewed} unreviewed); facts: {counts}"
        )
    if stats.note:
        print(f"note: {stats.note}", file=sys.stderr)
    return 0


def cmd_executor_train(args: argparse.Namespace) -> int:
    """LoRA SFT of a local causal LM on an exported dataset; resumes from its last
    checkpoint."""
    from common.executor import train

    config = train.TrainConfig(
        model=args.model,
        data=Path(args.data),
        out=Path(args.out),
        rank=args.rank,
        alpha=args.alpha,
        learning_rate=args.lr,
        batch_size=args.batch_size,
        grad_accum=args.grad_accum,
        epochs=args.epochs,
        max_length=args.max_length,
        save_steps=args.save_steps,
        gradient_checkpointing=args.gradient_checkpointing,
        seed=args.seed,
    )
    result = train.train(config, resume=not args.restart, quiet=args.quiet)
    print(json.dumps(result.model_dump(mode="json"), indent=1))
    return 0
