"""Start and stop `celery worker` processes for this app (tests and benchmarks use it)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


class WorkerProcess:
    """One `celery worker` (threads pool, or `pool="prefork"`) in its own process group,
    logging to a file."""

    def __init__(
        self,
        env: dict[str, str],
        log: Path,
        queues: str,
        concurrency: int = 2,
        name: str = "w",
        pool: str = "threads",
    ) -> None:
        self.log = log
        self._handle = log.open("ab")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "workers.celery_app",
                "worker",
                "-P",
                pool,
                "-c",
                str(concurrency),
                "-Q",
                queues,
                "-n",
                f"{name}@%h",
                "-l",
                "info",
                "--without-heartbeat",
                "--without-mingle",
                "--without-gossip",
            ],
            cwd=ROOT,
            env=env,
            stdout=self._handle,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"worker exited early:\n{self.log.read_text()[-3000:]}")
            if " ready." in self.log.read_text(errors="replace"):
                return
            time.sleep(0.2)
        raise TimeoutError(f"worker not ready:\n{self.log.read_text()[-3000:]}")

    def kill(self) -> None:
        """SIGKILL the whole process group: no chance to ack or clean up."""
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)
        self._handle.close()

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        self._handle.close()
