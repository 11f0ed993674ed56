"""A scripted OpenAI-compatible chat server on loopback, for the error paths of the client.

It speaks the real protocol over real HTTP (the openai package talks to it unchanged); each
request is answered by the next step of a script, or by a default when the script is empty.
A step is a function of the request body returning (status, body dict, headers, delay s).
The server notes when each request arrived (`arrivals`, epoch seconds), so a test can count
the requests of any window; `schema_answer` answers any stage with the smallest valid JSON.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = tuple[int, dict[str, Any], dict[str, str], float]
Step = Callable[[dict[str, Any]], Reply]


def completion(content: str, finish: str = "stop", prompt: int = 11, done: int = 7) -> Reply:
    body = {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 0,
        "model": "fake",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": finish,
            }
        ],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": done,
            "total_tokens": prompt + done,
        },
    }
    return 200, body, {}, 0.0


def tool_call(arguments: str) -> Reply:
    status, body, headers, delay = completion("")
    body["choices"][0]["message"] = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "answer", "arguments": arguments},
            }
        ],
    }
    body["choices"][0]["finish_reason"] = "tool_calls"
    return status, body, headers, delay


def error(status: int, message: str, headers: dict[str, str] | None = None) -> Reply:
    return status, {"error": {"message": message, "type": "test"}}, headers or {}, 0.0


def rate_limited(retry_after: float | None = None) -> Step:
    """A 429, with `Retry-After` when given."""
    headers = {} if retry_after is None else {"Retry-After": f"{retry_after:g}"}
    return lambda _: error(429, "Rate limit reached for requests", headers)


def _smallest(schema: dict[str, Any], defs: dict[str, Any]) -> Any:
    if "$ref" in schema:
        return _smallest(defs[schema["$ref"].rsplit("/", 1)[-1]], defs)
    if "enum" in schema:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    if "anyOf" in schema:
        return _smallest(schema["anyOf"][0], defs)
    kind = schema.get("type")
    if kind == "object":
        props = schema.get("properties", {})
        return {name: _smallest(props[name], defs) for name in schema.get("required", [])}
    if kind == "array":
        return []
    if kind == "string":
        return "x" * schema.get("minLength", 0)
    if kind in ("integer", "number"):
        return schema.get("minimum", 0)
    if kind == "boolean":
        return False
    return None


def schema_answer(request: dict[str, Any]) -> Reply:
    """The smallest answer the request's `json_schema` allows: no facts, no traits, no
    updates. Every stage parses it, so a whole pipeline runs without a model."""
    schema = request["response_format"]["json_schema"]["schema"]
    return completion(json.dumps(_smallest(schema, schema.get("$defs", {}))))


@dataclass
class FakeLLM:
    """The server's state: the script, the default step and every request received."""

    default: Step
    script: list[Step] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    arrivals: list[float] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    base_url: str = ""

    def then(self, *steps: Step) -> FakeLLM:
        with self.lock:
            self.script.extend(steps)
        return self

    def next_step(self, request: dict[str, Any]) -> Step:
        with self.lock:
            self.arrivals.append(time.time())
            self.requests.append(request)
            return self.script.pop(0) if self.script else self.default


@contextmanager
def serve(default: Step) -> Iterator[FakeLLM]:
    state = FakeLLM(default=default)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the http.server API
            length = int(self.headers.get("Content-Length", 0))
            request = json.loads(self.rfile.read(length) or b"{}")
            status, body, headers, delay = state.next_step(request)(request)
            if delay:
                time.sleep(delay)
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
                pass  # the client gave up (a timeout test)

        def log_message(self, *_: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
