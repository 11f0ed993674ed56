"""infra/local/stack.sh run for real on a private Redis port, with a stand-in for `celery`
that records what it sees: `stop` lets the workers finish (their grace period) while Redis still
answers, stops Redis last, and Redis keeps queued work across a stop and start."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

from tests.helpers.ports import free_port
from tests.helpers.skips import unavailable
from workers.launch import ROOT

pytestmark = pytest.mark.integration

STACK = ROOT / "infra" / "local" / "stack.sh"

# Stands in for `celery worker` and `celery flower`: logs its start, and on SIGTERM whether
# Redis still answers; a worker then takes STUB_STOP_S to finish, as a task in hand would.
STUB = """#!/usr/bin/env bash
role=flower
for arg in "$@"; do [ "$arg" = worker ] && role=worker; done
echo "$role start" >>"$STUB_LOG"
term() {
  if [ "$(redis-cli -p "$STUB_REDIS_PORT" ping 2>/dev/null)" = PONG ]; then
    echo "$role term redis-up" >>"$STUB_LOG"
  else
    echo "$role term redis-down" >>"$STUB_LOG"
  fi
  [ "$role" = worker ] && sleep "${STUB_STOP_S:-0}"
  echo "$role exit" >>"$STUB_LOG"
  exit 0
}
trap term TERM
while :; do sleep 0.1; done
"""


@dataclass
class Stack:
    env: dict[str, str]
    log: Path
    run_dir: Path
    port: int

    def __call__(self, command: str, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", str(STACK), command],
            env=self.env | env,
            capture_output=True,
            text=True,
            timeout=300,
        )

    def events(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []

    def redis(self) -> redis.Redis:
        return redis.Redis(port=self.port, decode_responses=True, socket_timeout=5)


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    for binary in ("redis-server", "redis-cli", "setsid"):
        if shutil.which(binary) is None:
            unavailable(f"{binary} is not installed")
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    celery = venv / "bin" / "celery"
    celery.write_text(STUB)
    celery.chmod(0o755)
    port = free_port()
    run_dir = tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ATOMMEM_")}
    env |= {
        "ATOMMEM_BROKER__URL": f"redis://127.0.0.1:{port}/0",
        # Relative, as a user would give it (the script runs from the repository root).
        "ATOMMEM_RUN_DIR": os.path.relpath(run_dir, ROOT),
        "ATOMMEM_VENV": str(venv),
        "ATOMMEM_FLOWER_PORT": str(free_port()),
        "STUB_LOG": str(tmp_path / "events.log"),
        "STUB_REDIS_PORT": str(port),
    }
    found = Stack(env=env, log=tmp_path / "events.log", run_dir=run_dir, port=port)
    try:
        yield found
    finally:
        found("stop", ATOMMEM_STOP_GRACE_S="5")
        pidfile = run_dir / "redis.pid"
        if pidfile.exists():  # a script that failed to stop its Redis: do not leave it running
            subprocess.run(["kill", pidfile.read_text().strip()], check=False)


def started(stack: Stack, command: str = "start", **env: str) -> None:
    done = stack(command, **env)
    assert done.returncode == 0, done.stdout + done.stderr
    deadline = time.monotonic() + 30
    while stack.events().count("worker start") < stack.events().count("worker exit") + 1:
        assert time.monotonic() < deadline, stack.events()
        time.sleep(0.1)


def test_stop_lets_workers_finish_while_redis_answers_then_stops_redis(stack: Stack) -> None:
    # Longer than the 10 s the script once gave a worker before SIGKILL.
    started(stack, STUB_STOP_S="11")
    stack.redis().set("queued", "a task")

    done = stack("stop", STUB_STOP_S="11")
    assert done.returncode == 0, done.stderr
    events = stack.events()
    assert "worker term redis-up" in events, events
    assert "worker exit" in events, "the worker was killed before it finished"
    stopped = [line.split()[1] for line in done.stdout.splitlines() if line.startswith("stopped")]
    assert stopped[-1] == "redis" and "worker-all" in stopped, stopped
    with pytest.raises(redis.ConnectionError):
        stack.redis().ping()

    # Queued work survives: the append-only file brings it back on the next start.
    started(stack)
    assert stack.redis().get("queued") == "a task"


def test_stop_kills_a_worker_still_running_after_its_grace_period(stack: Stack) -> None:
    started(stack, STUB_STOP_S="120")
    done = stack("stop", ATOMMEM_STOP_GRACE_S="1")
    assert done.returncode == 0, done.stderr
    assert "worker-all still running after 1s" in done.stderr
    assert "worker exit" not in stack.events()
    assert not list(stack.run_dir.glob("*.pid"))
