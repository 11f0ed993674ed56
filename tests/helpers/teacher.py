"""A scripted teacher for the Fact Executor's SFT tests: an OpenAI-compatible server on
loopback (tests.helpers.fake_llm_server) whose facts are the target turn's sentences."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tests.helpers.fake_llm_server import FakeLLM, Reply, completion, serve

MAX_FACTS = 3


def target_turn(request: dict[str, Any]) -> tuple[str, str]:
    """The speaker and text of the request's target turn (the extract prompt's last part)."""
    user = request["messages"][-1]["content"]
    line = user.split("Target turn:\n", 1)[1].strip().splitlines()[0]
    speaker, text = line.split(": ", 1)
    return speaker, text


def facts_of(speaker: str, text: str) -> list[str]:
    sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if len(s.strip()) > 12]
    return [f"{speaker} said: {s}" for s in sentences[:MAX_FACTS]]


def answer(request: dict[str, Any]) -> Reply:
    return completion(json.dumps({"facts": facts_of(*target_turn(request))}), prompt=50, done=20)


@contextmanager
def teacher() -> Iterator[FakeLLM]:
    with serve(answer) as server:
        yield server
