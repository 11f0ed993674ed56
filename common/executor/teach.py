"""Stage 1 of the Fact Executor's SFT: a teacher model extracts facts from the user's own
sessions, one extraction window per sample, with the Fact Executor's own prompt.

Windows are cut exactly as ingest cuts them (one target turn, `memory.context_window_k`
turns of context), and the teacher gets the very request the served executor will get, so
the samples teach what the executor is asked. A run appends each batch's samples as it ends
and skips the windows the file already holds: cut off, out of budget or failed, the same
command resumes where it stopped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from common.executor.samples import Provenance, Sample, Source, append, read_samples, sample_id
from common.llm.contracts import ExtractionWindow
from common.llm.model_backend import decode
from common.llm.prompts import extract
from common.llm.transport import Completion, Transport
from common.memory.extract import windows
from common.models.session import SessionInput


@dataclass(frozen=True)
class Budget:
    """What one run may spend: new samples and teacher tokens (None: no limit). A batch
    starts only while both are under their limit, so a run ends at most one batch over."""

    samples: int | None = None
    tokens: int | None = None


@dataclass
class Taught:
    """What a run did."""

    windows: int = 0
    already: int = 0
    written: int = 0
    failed: int = 0
    tokens: int = 0
    budget_reached: bool = False
    # The endpoint failed in a way the next window would not escape (connection refused,
    # timeouts, 5xx, 429): the run stopped there, its samples kept.
    stopped: str | None = None
    errors: list[str] = field(default_factory=list)

    @property
    def left(self) -> int:
        return self.windows - self.already - self.written


@dataclass(frozen=True)
class Teacher:
    """The teacher's endpoint as samples record it, and the transport that reaches it."""

    transport: Transport
    model: str
    url: str


def conversation_windows(sessions: list[SessionInput], context_k: int) -> list[ExtractionWindow]:
    """Every turn's window of every session, in session order."""
    return [w for session in sessions for w in windows(session, context_k)]


def _sample(
    tenant: str,
    source: Source,
    conversation: str,
    window: ExtractionWindow,
    teacher: Teacher,
    messages: list[dict[str, str]],
    done: Completion,
    facts: list[str],
) -> Sample:
    return Sample(
        id=sample_id(tenant, source, window, extract.VERSION),
        tenant=tenant,
        source=source,
        conversation=conversation,
        window=window,
        instruction=messages[0]["content"],
        prompt=messages[1]["content"],
        facts=facts,
        provenance=Provenance(
            teacher_model=teacher.model,
            teacher_url=teacher.url,
            prompt_stage=extract.STAGE,
            prompt_version=extract.VERSION,
            at=datetime.now(UTC),
            prompt_tokens=done.prompt_tokens,
            completion_tokens=done.completion_tokens,
            finish_reason=done.finish_reason,
        ),
    )


def teach(
    tenant: str,
    source: Source,
    conversation: str,
    todo: list[ExtractionWindow],
    teacher: Teacher,
    out: Path,
    *,
    max_tokens: int,
    batch: int,
    budget: Budget,
    progress: Callable[[int], None] = lambda _: None,
) -> Taught:
    """Samples for the windows `out` lacks, appended batch by batch. A window whose answer
    does not parse is left for the next run; an endpoint failure stops the run (`stopped`)."""
    have = {s.id for s in read_samples(out)}
    taught = Taught(windows=len(todo))
    pending = []
    for window in todo:
        if sample_id(tenant, source, window, extract.VERSION) in have:
            taught.already += 1
        else:
            pending.append(window)
    progress(taught.already)
    for start in range(0, len(pending), batch):
        spent_samples = budget.samples is not None and taught.written >= budget.samples
        spent_tokens = budget.tokens is not None and taught.tokens >= budget.tokens
        if spent_samples or spent_tokens:
            taught.budget_reached = True
            break
        group = pending[start : start + batch]
        if budget.samples is not None:
            group = group[: budget.samples - taught.written]
        requests = [extract.request(w, max_tokens) for w in group]
        answers = teacher.transport.complete(requests)
        kept: list[Sample] = []
        stop: str | None = None
        for window, request, done in zip(group, requests, answers, strict=True):
            taught.tokens += done.prompt_tokens + done.completion_tokens
            if done.error is not None:
                taught.failed += 1
                if done.retryable or done.short is not None:
                    stop = stop or done.error
                else:
                    taught.errors.append(done.error)
                continue
            try:
                facts = [f.strip() for f in decode(done, extract.Response).facts if f.strip()]
            except ValueError as exc:
                taught.failed += 1
                taught.errors.append(f"session {window.session_id}: unreadable answer: {exc}")
                continue
            messages = request.messages
            kept.append(
                _sample(tenant, source, conversation, window, teacher, messages, done, facts)
            )
        append(out, kept)
        taught.written += len(kept)
        progress(len(group))
        if stop is not None:
            taught.stopped = stop
            break
    return taught
