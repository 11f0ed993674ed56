"""How a prompt reaches a model: one request/response shape for every server and engine.

A backend renders a stage's prompt into a `ChatRequest` (messages plus the JSON schema the
answer must follow) and hands a batch of them to a `Transport`: the OpenAI-compatible HTTP
client, or the in-process vLLM engine on an extract worker. The transport returns the raw
text and its token counts; parsing and validation happen once, in the backend.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from common.errors import AtomMemError


class LLMError(AtomMemError):
    """A model call that failed for good: the stage, the reason and how many tries it took."""


@dataclass(frozen=True)
class ChatRequest:
    """One call: the stage it serves, chat messages, the response's JSON schema."""

    stage: str
    messages: list[dict[str, str]]
    schema: dict[str, Any]
    schema_name: str
    max_tokens: int


@dataclass
class Completion:
    """The model's text and token counts, or why the call failed (`error`) and whether
    trying again could help (`retryable`: timeouts, 429, 5xx, a dropped connection);
    `throttled` for a 429, and how long the call waited for its endpoint's budget.
    `failing_since`: for a transient failure of a gated endpoint, since when the endpoint has
    been failing (every process's calls together); `short`: the call was never sent, its
    budget staying short (retry in that many seconds)."""

    text: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str | None = None
    error: str | None = None
    retryable: bool = False
    retry_after: float | None = None
    throttled: bool = False
    waited_s: float = 0.0
    failing_since: float | None = None
    short: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class Transport(Protocol):
    """A model endpoint. `complete` keeps the order of its requests, never raises for one
    failed call (it reports it in that call's `Completion`) and never retries: the backend
    retries, in one place, for transport errors and invalid output alike."""

    name: str

    def complete(self, requests: list[ChatRequest]) -> list[Completion]: ...
