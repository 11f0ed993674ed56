"""Token accounting: model calls and tokens per stage, gathered by whoever opens a meter.

A job's extract chunk, a commit stage, or a question opens `metered()`; every model call
made in that thread while it is open is counted in it, by stage. Calls a skip rule saved
are counted too, so a job shows what it spent and what it did not have to; so are calls a
re-run task replayed from what its earlier run kept (`replayed`, also counted as calls: the
run that made them gave its counts back). Per endpoint role
(`extractor`, `general`) it also counts HTTP calls, tokens, 429s and waits for the budget
(`llm.endpoint.<role>.<what>`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from common.llm.transport import Completion

PREFIX = "llm."
ENDPOINT = "endpoint"
ENDPOINT_COUNTS = ("calls", "tokens", "throttled", "waits", "wait_ms")


@dataclass
class Usage:
    """Per stage: calls made, prompt and completion tokens, calls saved by a skip rule."""

    stages: dict[str, dict[str, int]] = field(default_factory=dict)
    endpoints: dict[str, dict[str, int]] = field(default_factory=dict)

    def _endpoint(self, role: str) -> dict[str, int]:
        return self.endpoints.setdefault(role, dict.fromkeys(ENDPOINT_COUNTS, 0))

    def called(self, role: str, done: Completion) -> None:
        """One HTTP call (or engine call) of an endpoint role, failed ones included."""
        e = self._endpoint(role)
        e["calls"] += 1
        e["tokens"] += done.prompt_tokens + done.completion_tokens
        e["throttled"] += int(done.throttled)
        if done.waited_s > 0:
            e["waits"] += 1
            e["wait_ms"] += round(done.waited_s * 1000)

    def _stage(self, stage: str) -> dict[str, int]:
        return self.stages.setdefault(
            stage, {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "skipped": 0}
        )

    def record(self, stage: str, prompt_tokens: int, completion_tokens: int) -> None:
        s = self._stage(stage)
        s["calls"] += 1
        s["prompt_tokens"] += prompt_tokens
        s["completion_tokens"] += completion_tokens

    def replayed(self, stage: str) -> None:
        """A call answered from what an earlier run of the task kept (not sent again)."""
        s = self._stage(stage)
        s["replayed"] = s.get("replayed", 0) + 1

    def skipped(self, stage: str, n: int = 1) -> None:
        if n:
            self._stage(stage)["skipped"] += n

    def merge(self, other: Usage) -> None:
        for stage, counts in other.stages.items():
            mine = self._stage(stage)
            for key, value in counts.items():
                mine[key] = mine.get(key, 0) + value
        for role, counts in other.endpoints.items():
            mine = self._endpoint(role)
            for key, value in counts.items():
                mine[key] = mine.get(key, 0) + value

    def total(self, key: str) -> int:
        return sum(counts.get(key, 0) for counts in self.stages.values())

    def as_counts(self) -> dict[str, int]:
        """Flat counts for a job: `llm.<stage>.<what>` plus the totals."""
        out = {
            f"{PREFIX}{stage}.{key}": value
            for stage, counts in sorted(self.stages.items())
            for key, value in counts.items()
        }
        if self.stages:
            for key in ("prompt_tokens", "completion_tokens"):
                out[f"{PREFIX}{key}"] = self.total(key)
        for role, counts in sorted(self.endpoints.items()):
            out |= {f"{PREFIX}{ENDPOINT}.{role}.{key}": value for key, value in counts.items()}
        return out

    @classmethod
    def from_counts(cls, counts: Mapping[str, int]) -> Usage:
        usage = cls()
        for name, value in counts.items():
            parts = name.split(".")
            if len(parts) == 3 and parts[0] + "." == PREFIX:
                usage._stage(parts[1])[parts[2]] = int(value)
            elif len(parts) == 4 and parts[0] + "." == PREFIX and parts[1] == ENDPOINT:
                usage._endpoint(parts[2])[parts[3]] = int(value)
        return usage


_CURRENT: ContextVar[Usage | None] = ContextVar("atommem_llm_usage", default=None)


@contextmanager
def metered() -> Iterator[Usage]:
    """Count the model calls made in this thread until the block ends (meters nest: an
    inner meter's calls also reach the outer one when it closes)."""
    outer = _CURRENT.get()
    usage = Usage()
    token = _CURRENT.set(usage)
    try:
        yield usage
    finally:
        _CURRENT.reset(token)
        if outer is not None:
            outer.merge(usage)


def record(stage: str, prompt_tokens: int, completion_tokens: int) -> None:
    usage = _CURRENT.get()
    if usage is not None:
        usage.record(stage, prompt_tokens, completion_tokens)


def skipped(stage: str, n: int = 1) -> None:
    usage = _CURRENT.get()
    if usage is not None:
        usage.skipped(stage, n)


def replayed(stage: str) -> None:
    usage = _CURRENT.get()
    if usage is not None:
        usage.replayed(stage)


def endpoint(role: str, done: Completion) -> None:
    usage = _CURRENT.get()
    if usage is not None:
        usage.called(role, done)
