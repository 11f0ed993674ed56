"""The OpenAI-compatible transport: OpenAI, vLLM's server, llama.cpp's server, and the like.

Structured output is negotiated per endpoint. `json_schema` is OpenAI's form; some servers
refuse it (llama.cpp's answers HTTP 500 "Input should be 'text' or 'json_object'") but
enforce `{"type": "json_object", "schema": ...}` or a forced tool call with a grammar. In
`auto` mode the first request tries the forms in that order, and the first one the server
accepts is kept for the endpoint's lifetime. The openai client's own retries are off: the
backend retries, once, for every cause.

With a budget gate (common/llm/budget.py) every HTTP call first takes its place in the
endpoint's budget, in the calling thread and in order, so the calls of a batch start as the
budget allows; each settles its tokens when it ends, and a 429 holds every process off. A
batch whose budget stays short returns the calls it did send and marks the rest `short`, so
the backend keeps what went through. Transient failures mark the endpoint failing (since
when, for every process), and a call that goes through ends that spell. A question's call
(`budget.deadline_scope`) waits for its server no longer than its caller waits for it.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

import openai

from common.llm import budget
from common.llm.budget import BudgetShort, Gate, Grant, endpoint_id
from common.llm.transport import ChatRequest, Completion
from common.observability import metrics
from common.settings import LLMEndpoint, LLMSettings

MODES = ("json_schema", "json_object", "tool")
POOL_THREADS = 512  # calls in flight from one process at most, every batch together
# Words a server's error uses when it refuses a structured-output form rather than failing.
_REFUSAL_HINTS = ("response_format", "json_schema", "json_object", "tool_choice", "tools")


def _refused(exc: openai.APIStatusError) -> bool:
    if exc.status_code not in (400, 422, 500, 501):
        return False
    return any(hint in str(exc).lower() for hint in _REFUSAL_HINTS)


def _retry_after(exc: openai.APIStatusError) -> float | None:
    value = exc.response.headers.get("retry-after") if exc.response is not None else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


class OpenAITransport:
    """One endpoint (role) of the `openai` backend; thread-safe, batches run concurrently."""

    def __init__(
        self, endpoint: LLMEndpoint, llm: LLMSettings, role: str, gate: Gate | None = None
    ) -> None:
        self.name = f"openai:{role}"
        self._role = role
        self.endpoint = endpoint_id(endpoint)  # which model answers: part of a call's digest
        self._endpoint = endpoint
        self._llm = llm
        self._gate = gate
        key = endpoint.api_key.get_secret_value() if endpoint.api_key else None
        self._client = openai.OpenAI(
            base_url=endpoint.base_url,
            api_key=key or "unused",  # local servers take any key; OpenAI rejects this one
            timeout=llm.timeout_s,
            max_retries=0,
        )
        fixed = llm.structured_output
        self._mode: str | None = None if fixed == "auto" else fixed
        self._mode_lock = threading.Lock()
        # Threads for the calls of every batch under way in this process (a thread per
        # call, made as needed); `llm.concurrency` bounds each batch on its own. One pool
        # of `llm.concurrency` threads held an extract worker with N slots at 8 calls in
        # flight whatever N (bench.scale_out found it); the endpoint's `max_concurrent`
        # budget is what bounds a server's load across tasks and processes.
        self._pool = ThreadPoolExecutor(max_workers=POOL_THREADS, thread_name_prefix="llm")

    @property
    def mode(self) -> str | None:
        """The structured-output form this endpoint accepted (None until the first call)."""
        return self._mode

    def complete(self, requests: list[ChatRequest]) -> list[Completion]:
        # Read here: the pool's threads do not see the calling context's deadline.
        deadline = budget.deadline()
        batch = threading.BoundedSemaphore(self._llm.concurrency)

        def bounded(request: ChatRequest, grant: Grant | None) -> Completion:
            with batch:
                return self._one(request, grant, deadline)

        if self._gate is None:
            if len(requests) == 1:
                return [self._one(requests[0], None, deadline)]
            return list(self._pool.map(lambda r: bounded(r, None), requests))
        if len(requests) == 1:
            return [self._one(requests[0], self._gate.admit(requests[0]), deadline)]
        started: list[Future[Completion]] = []
        try:
            for request in requests:  # each starts once the budget lets it
                grant = self._gate.admit(request)
                started.append(self._pool.submit(bounded, request, grant))
        except BudgetShort as short:  # the calls under way end; the rest were never sent
            if not started:
                raise
            done = [f.result() for f in started]
            left = range(len(requests) - len(done))
            where = {"endpoint": short.endpoint}
            return done + [
                Completion(error=str(short), short=short.retry_in, extra=where) for _ in left
            ]
        except Exception:  # the budget's store briefly away
            wait(started)  # the calls under way settle their budget before the task goes
            raise
        return [f.result() for f in started]

    def _one(
        self, request: ChatRequest, grant: Grant | None = None, deadline: float | None = None
    ) -> Completion:
        """One call, counted in the metrics however it ends (each HTTP request of it timed)."""
        done = self._send(request, grant, deadline)
        outcome = "throttled" if done.throttled else "error" if done.error is not None else "ok"
        waited = done.waited_s if self._gate is not None else None
        metrics.model_answered(
            self.endpoint, self._role, outcome, done.prompt_tokens, done.completion_tokens, waited
        )
        return done

    def _send(
        self, request: ChatRequest, grant: Grant | None, deadline: float | None
    ) -> Completion:
        modes = [self._mode] if self._mode else list(MODES)
        first_error: Completion | None = None
        waited = 0.0
        for mode in modes:
            timeout = self._llm.timeout_s
            if deadline is not None:  # a question: no longer than its caller waits
                timeout = min(timeout, deadline - time.time())
                if timeout <= 0:
                    self._settle(grant, 0)
                    gone = f"{budget.WAITING}: the question's caller stopped waiting first"
                    return Completion(error=gone, waited_s=waited)
            if self._gate is not None and grant is None:
                grant = self._gate.admit(request)  # the next form is another call
            waited += grant.waited_s if grant is not None else 0.0
            arguments = self._arguments(request, mode)
            try:
                with metrics.model_call(self.endpoint, self._role):
                    response = self._client.chat.completions.create(**arguments, timeout=timeout)
            except openai.APITimeoutError:
                self._settle(grant, None)  # the server may have spent the tokens
                if deadline is not None and time.time() >= deadline:
                    gone = f"timed out after {timeout:g} s, when the question's caller stopped"
                    return Completion(error=gone, waited_s=waited)  # not retried: nobody waits
                timed_out = f"timed out after {timeout:g} s"
                return self._failing(Completion(error=timed_out, retryable=True, waited_s=waited))
            except openai.APIConnectionError as exc:
                self._settle(grant, None)
                where = f"cannot reach {self._where()}: {exc}"
                return self._failing(Completion(error=where, retryable=True, waited_s=waited))
            except openai.APIStatusError as exc:
                self._settle(grant, 0)  # refused: nothing generated
                grant = None
                failed = self._status_error(exc)
                failed.waited_s = waited
                if failed.throttled and self._gate is not None:
                    self._gate.throttled(failed.retry_after)
                if self._mode is None and _refused(exc):
                    first_error = first_error or failed
                    continue  # this server does not take this form: try the next one
                if failed.retryable and not failed.throttled:
                    return self._failing(failed)
                return failed
            with self._mode_lock:
                self._mode = self._mode or mode
            done = self._completion(response, mode)
            used = done.prompt_tokens + done.completion_tokens
            self._settle(grant, used or None)
            if self._gate is not None:
                self._gate.recovered()
            done.waited_s = waited
            return done
        assert first_error is not None
        first_error.error = f"no structured-output form accepted ({first_error.error})"
        first_error.retryable = False
        return first_error

    def _failing(self, failed: Completion) -> Completion:
        """A transient failure (5xx, timeout, connection): since when the endpoint fails."""
        if self._gate is not None:
            failed.failing_since = self._gate.failing()
        return failed

    def _settle(self, grant: Grant | None, used: int | None) -> None:
        if self._gate is not None and grant is not None:
            self._gate.settle(grant, used)

    def _where(self) -> str:
        return self._endpoint.base_url or "api.openai.com"

    def _status_error(self, exc: openai.APIStatusError) -> Completion:
        code = exc.status_code
        retryable = code in (408, 409, 429) or code >= 500
        return Completion(
            error=f"HTTP {code} from {self._where()}: {exc.message}",
            retryable=retryable,
            retry_after=_retry_after(exc) if code == 429 else None,
            throttled=code == 429,
        )

    def _arguments(self, request: ChatRequest, mode: str) -> dict[str, Any]:
        args: dict[str, Any] = {
            "model": self._endpoint.model,
            "messages": request.messages,
            "max_tokens": request.max_tokens,
            "temperature": self._llm.temperature,
        }
        if self._llm.seed is not None:
            args["seed"] = self._llm.seed
        if mode == "json_schema":
            args["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": request.schema_name, "schema": request.schema},
            }
        elif mode == "json_object":
            args["response_format"] = {"type": "json_object", "schema": request.schema}
        else:
            args["tools"] = [
                {
                    "type": "function",
                    "function": {"name": request.schema_name, "parameters": request.schema},
                }
            ]
            args["tool_choice"] = {"type": "function", "function": {"name": request.schema_name}}
        return args

    @staticmethod
    def _completion(response: Any, mode: str) -> Completion:
        if not response.choices:
            return Completion(error="the server returned no choices", retryable=True)
        choice = response.choices[0]
        text = choice.message.content or ""
        if mode == "tool" and choice.message.tool_calls:
            text = choice.message.tool_calls[0].function.arguments or ""
        usage = response.usage
        return Completion(
            text=text,
            prompt_tokens=(usage.prompt_tokens or 0) if usage else 0,
            completion_tokens=(usage.completion_tokens or 0) if usage else 0,
            finish_reason=choice.finish_reason,
        )
