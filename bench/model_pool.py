"""A stand-in for a pool of served Fact Executors, for benchmarks and tests: an
OpenAI-compatible chat server on loopback that answers the extractor role from pre-extracted
facts. Its latency is configured, not a model's: figures measured against it say how the
system behaves around a model of that latency and concurrency, never how fast a model is.

    python -m bench.model_pool --facts ../shared/data/locomo/atommem_facts \\
        --latency-ms 1000 --per-token-ms 0 --concurrency 64 --port 0

prints its base URL (`http://127.0.0.1:PORT/v1`) as the first line of stdout and serves until
SIGINT or SIGTERM. In a test or a bench: `with ModelPool.from_path(facts, PoolConfig(...)) as
pool: pool.base_url, pool.stats()`.

- **What it answers.** A request of the `extract` stage (common/llm/prompts/extract.py) gets
  the pre-extracted facts of its target turn, looked up by (speaker, text), as
  `{"facts": [...]}`, in the form the request asked for: `response_format` `json_schema` or
  `json_object`, or a forced tool call. The facts are clipped to the request's schema
  (`maxItems`, `maxLength`), as a grammar-constrained server's output would be. A turn it
  does not know gets no facts (`unknown_turns`). Any other stage gets a 400: the stand-in
  serves the extractor role only, the general role stays `rules`.
- **Tokens.** Prompt and completion tokens are estimated at 4 characters a token (message
  contents, and the answer's JSON text), the estimate the model budget uses.
- **Latency.** A call takes `latency_ms` plus `per_token_ms` per completion token, inside a
  generation slot. At most `concurrency` calls hold a slot at once, as a batching vLLM server
  runs so many sequences; the rest wait first in, first out, and their wait is part of their
  latency.
- **Faults.** A call can be answered at once, before any slot, with a 429 (with `Retry-After`)
  or a 5xx: every k-th call (`throttle_every`, `fail_every`, counted over every chat call in
  arrival order) or at a rate drawn from a seeded RNG (`throttle_rate`, `fail_rate`).
- **Stats.** `GET /stats` returns the counts as JSON (calls by status, in flight now and at
  most, queued now and at most, total queue wait, busy slot-seconds, utilisation, tokens,
  unknown turns); `POST /stats/reset` returns them and starts them again.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import signal
import sys
import threading
import time
from collections import Counter, deque
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from common.inputs.formats import read_sessions
from common.llm.prompts import extract

CHARS_PER_TOKEN = 4
TARGET = "Target turn:\n"
TurnKey = tuple[str, str]


@dataclass(frozen=True)
class PoolConfig:
    """How the stand-in behaves: latency, generation slots and injected faults."""

    latency_ms: float = 0.0
    per_token_ms: float = 0.0
    concurrency: int = 64
    throttle_every: int = 0  # every k-th call a 429 (0: never)
    throttle_rate: float = 0.0  # share of calls answered 429
    fail_every: int = 0  # every k-th call a `fail_status`
    fail_rate: float = 0.0
    fail_status: int = 503
    retry_after_s: float = 1.0  # the 429s' Retry-After
    seed: int = 0

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if min(self.throttle_every, self.fail_every) < 0:
            raise ValueError("throttle_every and fail_every count calls: 0 (never) or more")
        if not 500 <= self.fail_status <= 599:
            raise ValueError("fail_status must be a 5xx")
        if min(self.latency_ms, self.per_token_ms, self.retry_after_s) < 0:
            raise ValueError("latencies and retry_after_s must not be negative")
        if not (0 <= self.throttle_rate <= 1 and 0 <= self.fail_rate <= 1):
            raise ValueError("rates must be in [0, 1]")


def load_facts(path: Path) -> dict[TurnKey, list[str]]:
    """Every turn's pre-extracted facts, by (speaker, text), from a facts file or every
    `*.json` in a directory (the first file to name a turn wins)."""
    files = sorted(path.glob("*.json")) if path.is_dir() else [path]
    found: dict[TurnKey, list[str]] = {}
    for file in files:
        for session in read_sessions(file).sessions:
            for turn in session.turns:
                found.setdefault((turn.speaker, turn.text.strip()), list(turn.facts or []))
    return found


def tokens(text: str) -> int:
    return max(1, math.ceil(len(text) / CHARS_PER_TOKEN))


class _Slots:
    """At most `n` holders at once; the others wait in arrival order."""

    def __init__(self, n: int, stats: _Stats) -> None:
        self._n = n
        self._stats = stats
        self._busy = 0
        self._waiting: deque[object] = deque()
        self._changed = threading.Condition(stats.lock)

    def acquire(self) -> float:
        """Take a slot; how long the wait for it was."""
        started = time.monotonic()
        with self._changed:
            if self._busy >= self._n or self._waiting:
                me = object()
                self._waiting.append(me)
                self._stats.queued_now(len(self._waiting))
                while self._waiting[0] is not me or self._busy >= self._n:
                    self._changed.wait()
                self._waiting.popleft()
                self._stats.queued_now(len(self._waiting))
                self._changed.notify_all()  # the next in line may take a free slot too
            self._busy += 1
            waited = time.monotonic() - started
            self._stats.in_flight_now(self._busy, waited)
        return waited

    def release(self, held_s: float) -> None:
        with self._changed:
            self._busy -= 1
            self._stats.in_flight_now(self._busy, None, held_s)
            self._changed.notify_all()


class _Stats:
    """The counters `GET /stats` returns; every update under `lock`."""

    def __init__(self, config: PoolConfig) -> None:
        self.lock = threading.Lock()
        self._config = config
        self._in_flight = 0
        self._queued = 0
        self.reset()

    def reset(self) -> None:
        """Zero the counts (call under `lock`); the peaks start from what is there now."""
        self.started = time.monotonic()
        self.calls: Counter[str] = Counter()
        self.max_in_flight = self._in_flight
        self.max_queued = self._queued
        self.queue_wait_s = 0.0
        self.busy_s = 0.0
        self.known_turns = 0
        self.unknown_turns = 0
        self.facts = 0
        self.clipped_facts = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0

    def queued_now(self, n: int) -> None:
        self._queued = n
        self.max_queued = max(self.max_queued, n)

    def in_flight_now(self, n: int, waited_s: float | None, held_s: float = 0.0) -> None:
        self._in_flight = n
        self.max_in_flight = max(self.max_in_flight, n)
        self.queue_wait_s += waited_s or 0.0
        self.busy_s += held_s

    def snapshot(self) -> dict[str, Any]:
        elapsed = time.monotonic() - self.started
        capacity = self._config.concurrency * elapsed
        return {
            "calls": dict(sorted(self.calls.items())),
            "calls_total": sum(self.calls.values()),
            "in_flight": self._in_flight,
            "max_in_flight": self.max_in_flight,
            "queued": self._queued,
            "max_queued": self.max_queued,
            "queue_wait_s": round(self.queue_wait_s, 6),
            "busy_s": round(self.busy_s, 6),
            "elapsed_s": round(elapsed, 6),
            "utilisation": round(self.busy_s / capacity, 6) if capacity > 0 else 0.0,
            "known_turns": self.known_turns,
            "unknown_turns": self.unknown_turns,
            "facts": self.facts,
            "clipped_facts": self.clipped_facts,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "config": asdict(self._config),
        }


Reply = tuple[int, dict[str, Any], dict[str, str]]


def _error(status: int, message: str, kind: str, headers: dict[str, str] | None = None) -> Reply:
    return status, {"error": {"message": message, "type": kind, "code": status}}, headers or {}


def _form(body: dict[str, Any]) -> tuple[str, str | None, dict[str, Any]]:
    """The structured-output form a request asks for: its kind, the answer's name (none for
    `json_object`) and the schema."""
    fmt = body.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        spec = fmt.get("json_schema") or {}
        return "json_schema", spec.get("name"), spec.get("schema") or {}
    if fmt.get("type") == "json_object":
        return "json_object", None, fmt.get("schema") or {}
    tools = body.get("tools") or []
    if tools:
        function = tools[0].get("function") or {}
        return "tool", function.get("name"), function.get("parameters") or {}
    return "text", None, {}


def _is_extract(name: str | None, messages: Sequence[Mapping[str, Any]]) -> bool:
    if name is not None:
        return name.startswith(f"{extract.STAGE}_v")
    system = next((str(m.get("content") or "") for m in messages if m.get("role") == "system"), "")
    return system.startswith(extract.SYSTEM.strip())


def _target(messages: Sequence[Mapping[str, Any]]) -> TurnKey | None:
    """The extract prompt's target turn, `speaker: text`."""
    user = next((str(m.get("content") or "") for m in messages if m.get("role") == "user"), "")
    at = user.find(TARGET)
    if at < 0:
        return None
    speaker, sep, text = user[at + len(TARGET) :].partition(": ")
    return (speaker.strip(), text.strip()) if sep else None


def _clip(facts: list[str], schema: Mapping[str, Any]) -> tuple[list[str], int]:
    """The facts within the schema's bounds, and how many were cut or shortened."""
    spec = (schema.get("properties") or {}).get("facts") or {}
    most = spec.get("maxItems")
    longest = (spec.get("items") or {}).get("maxLength")
    kept = facts[:most] if most is not None else list(facts)
    if longest is not None:
        kept = [f[:longest] for f in kept]
    return kept, len(facts) - len(kept) + sum(a != b for a, b in zip(facts, kept, strict=False))


def _completion(model: str, mode: str, name: str | None, content: str, prompt: int) -> Reply:
    done = tokens(content)
    message: dict[str, Any] = {"role": "assistant", "content": content}
    finish = "stop"
    if mode == "tool":
        call = {
            "id": "call_0",
            "type": "function",
            "function": {"name": name, "arguments": content},
        }
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        finish = "tool_calls"
    body = {
        "id": "chatcmpl-stand-in",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": done,
            "total_tokens": prompt + done,
        },
    }
    return 200, body, {}


class ModelPool:
    """The stand-in server: `start()` (or `with`) binds it and returns its base URL."""

    def __init__(
        self,
        facts: Mapping[TurnKey, Sequence[str]],
        config: PoolConfig | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.config = config or PoolConfig()
        self._facts = {key: list(value) for key, value in facts.items()}
        self._address = (host, port)
        self._stats = _Stats(self.config)
        self._slots = _Slots(self.config.concurrency, self._stats)
        self._rng = random.Random(self.config.seed)
        self._arrivals = 0
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.base_url = ""

    @classmethod
    def from_path(
        cls, path: Path, config: PoolConfig | None = None, host: str = "127.0.0.1", port: int = 0
    ) -> ModelPool:
        return cls(load_facts(path), config, host, port)

    def __enter__(self) -> ModelPool:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def start(self) -> str:
        pool = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as the openai client's pool expects

            def do_POST(self) -> None:  # noqa: N802 - the http.server API
                length = int(self.headers.get("Content-Length", 0))
                raw = self.rfile.read(length) if length else b""
                path = self.path.rstrip("/")
                if path.endswith("/chat/completions"):
                    try:
                        body = json.loads(raw or b"{}")
                    except ValueError:
                        self._send(*_error(400, "the body is not JSON", "invalid_request_error"))
                        return
                    self._send(*pool._chat(body))
                elif path == "/stats/reset":
                    self._send(200, pool.reset_stats(), {})
                else:
                    self._send(*_error(404, f"no such path {self.path}", "not_found"))

            def do_GET(self) -> None:  # noqa: N802
                path = self.path.rstrip("/")
                if path == "/stats":
                    self._send(200, pool.stats(), {})
                elif path.endswith("/models"):
                    data = [{"id": "stand-in", "object": "model", "owned_by": "bench"}]
                    self._send(200, {"object": "list", "data": data}, {})
                else:
                    self._send(*_error(404, f"no such path {self.path}", "not_found"))

            def _send(self, status: int, body: dict[str, Any], headers: dict[str, str]) -> None:
                data = json.dumps(body).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (its timeout)

            def log_message(self, *_: Any) -> None:
                pass

        server = ThreadingHTTPServer(self._address, Handler, bind_and_activate=False)
        server.daemon_threads = True
        server.request_queue_size = 1024  # a burst of clients connects at once
        server.server_bind()
        server.server_activate()
        self._server = server
        with self._stats.lock:
            self._stats.reset()  # elapsed and utilisation count from here
        self._thread = threading.Thread(target=server.serve_forever, daemon=True)
        self._thread.start()
        host, port = server.server_address[:2]
        self.base_url = f"http://{str(host)}:{port}/v1"
        return self.base_url

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    @property
    def turns(self) -> int:
        """How many turns it knows."""
        return len(self._facts)

    def stats(self) -> dict[str, Any]:
        with self._stats.lock:
            return self._stats.snapshot()

    def reset_stats(self) -> dict[str, Any]:
        """The counts so far, then zero."""
        with self._stats.lock:
            before = self._stats.snapshot()
            self._stats.reset()
        return before

    # --- one call ------------------------------------------------------------------------------

    def _chat(self, body: dict[str, Any]) -> Reply:
        reply = self._answer(body)
        with self._stats.lock:
            self._stats.calls[str(reply[0])] += 1
        return reply

    def _fault(self) -> Reply | None:
        """The injected fault of this call, if any (drawn in arrival order)."""
        cfg = self.config
        with self._stats.lock:
            self._arrivals += 1
            n = self._arrivals
            throttle = self._rng.random() < cfg.throttle_rate
            fail = self._rng.random() < cfg.fail_rate
        if throttle or (cfg.throttle_every and n % cfg.throttle_every == 0):
            wait = {"Retry-After": f"{cfg.retry_after_s:g}"}
            return _error(429, "Rate limit reached (injected)", "rate_limit_error", wait)
        if fail or (cfg.fail_every and n % cfg.fail_every == 0):
            return _error(cfg.fail_status, "The server had an error (injected)", "server_error")
        return None

    def _answer(self, body: dict[str, Any]) -> Reply:
        messages = body.get("messages") or []
        mode, name, schema = _form(body)
        if not _is_extract(name, messages):
            stage = name.rsplit("_v", 1)[0] if name else "another stage"
            return _error(
                400,
                f"this stand-in serves the extractor role only (the {extract.STAGE!r} stage), "
                f"not {stage!r}: keep the general role on rules "
                "(ATOMMEM_LLM__GENERAL_BACKEND=rules)",
                "invalid_request_error",
            )
        fault = self._fault()
        if fault is not None:
            return fault
        key = _target(messages)
        found = self._facts.get(key) if key is not None else None
        facts, clipped = _clip(found or [], schema)
        content = json.dumps({"facts": facts})
        prompt = sum(tokens(str(m.get("content") or "")) for m in messages)
        reply = _completion(str(body.get("model", "stand-in")), mode, name, content, prompt)
        delay = (self.config.latency_ms + self.config.per_token_ms * tokens(content)) / 1000
        self._slots.acquire()
        held = time.monotonic()
        try:
            time.sleep(delay)
        finally:
            self._slots.release(time.monotonic() - held)
        with self._stats.lock:
            stats = self._stats
            stats.known_turns += found is not None
            stats.unknown_turns += found is None
            stats.facts += len(facts)
            stats.clipped_facts += clipped
            stats.prompt_tokens += prompt
            stats.completion_tokens += tokens(content)
        return reply


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--facts", required=True, help="a LoCoMo facts file or a directory")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0: a free port")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="per call")
    parser.add_argument("--per-token-ms", type=float, default=0.0, help="per completion token")
    parser.add_argument("--concurrency", type=int, default=64, help="generation slots")
    parser.add_argument("--throttle-every", type=int, default=0, help="every k-th call a 429")
    parser.add_argument("--throttle-rate", type=float, default=0.0, help="share of 429s")
    parser.add_argument("--fail-every", type=int, default=0, help="every k-th call a 5xx")
    parser.add_argument("--fail-rate", type=float, default=0.0, help="share of 5xx")
    parser.add_argument("--fail-status", type=int, default=503)
    parser.add_argument("--retry-after-s", type=float, default=1.0, help="on 429s")
    parser.add_argument("--seed", type=int, default=0, help="of the fault rates' draws")
    args = parser.parse_args(argv)
    config = PoolConfig(
        latency_ms=args.latency_ms,
        per_token_ms=args.per_token_ms,
        concurrency=args.concurrency,
        throttle_every=args.throttle_every,
        throttle_rate=args.throttle_rate,
        fail_every=args.fail_every,
        fail_rate=args.fail_rate,
        fail_status=args.fail_status,
        retry_after_s=args.retry_after_s,
        seed=args.seed,
    )
    pool = ModelPool.from_path(Path(args.facts), config, args.host, args.port)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    print(pool.start(), flush=True)
    where = pool.base_url.removesuffix("/v1")
    print(f"stand-in model pool: {pool.turns} turns, stats at {where}/stats", file=sys.stderr)
    while not stop.wait(0.5):  # woken by the signal handler, checked twice a second
        pass
    pool.close()
    print(json.dumps(pool.stats()), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
