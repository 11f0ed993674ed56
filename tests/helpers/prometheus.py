"""A real Prometheus server for the metrics tests (Debian's `prometheus` package): scrapes
loopback targets every second into a private storage directory, queried over its HTTP API;
and a `celery worker` on the prefork pool, whose children's samples it should see summed."""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.helpers.ports import free_port
from tests.helpers.skips import unavailable
from tests.helpers.stack import until_ready
from workers.launch import WorkerProcess


@dataclass(frozen=True)
class Target:
    """One scrape job: a loopback port, and the bearer token its /metrics wants, if any."""

    job: str
    port: int
    token: str | None = None


def binary() -> str:
    """The prometheus binary; where it is missing the test skips (and fails under CI)."""
    found = shutil.which("prometheus")
    if found is None:
        unavailable("the prometheus binary is not installed (apt-get install prometheus)")
    return found


def config(targets: list[Target]) -> dict[str, Any]:
    jobs: list[dict[str, Any]] = []
    for t in targets:
        job: dict[str, Any] = {
            "job_name": t.job,
            "static_configs": [{"targets": [f"127.0.0.1:{t.port}"]}],
        }
        if t.token is not None:
            job["authorization"] = {"type": "Bearer", "credentials": t.token}
        jobs.append(job)
    return {
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
        "scrape_configs": jobs,
    }


class Prometheus:
    """`prometheus` on 127.0.0.1:<free port>, its config and storage in `directory` (JSON is
    YAML, so the generated config needs no YAML writer)."""

    def __init__(self, directory: Path, targets: list[Target]) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        cfg = directory / "prometheus.yml"
        cfg.write_text(json.dumps(config(targets), indent=1))
        self.log = directory / "prometheus.log"
        self._handle = self.log.open("wb")
        self.proc = subprocess.Popen(
            [
                binary(),
                f"--config.file={cfg}",
                f"--storage.tsdb.path={directory / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ],
            stdout=self._handle,
            stderr=subprocess.STDOUT,
        )

    def wait_ready(self, timeout: float = 60) -> None:
        until_ready(f"{self.url}/-/ready", self.proc, self.log, "prometheus", timeout)

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query's result vector."""
        reply = httpx.get(f"{self.url}/api/v1/query", params={"query": expr}, timeout=10)
        reply.raise_for_status()
        body = reply.json()
        assert body["status"] == "success", body
        return list(body["data"]["result"])

    def by(self, expr: str, label: str) -> dict[str, float]:
        """The query's samples, keyed by one of their labels."""
        return {r["metric"].get(label, ""): float(r["value"][1]) for r in self.query(expr)}

    def total(self, expr: str) -> float:
        """The sum of the query's samples (0 while there are none)."""
        return sum(float(r["value"][1]) for r in self.query(expr))

    def targets_up(self) -> dict[str, str]:
        reply = httpx.get(f"{self.url}/api/v1/targets", timeout=10).json()
        return {t["labels"]["job"]: t["health"] for t in reply["data"]["activeTargets"]}

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._handle.close()


class ForkingWorker(WorkerProcess):
    """A `celery worker` on the prefork pool: its children run the tasks, its main process
    serves their summed samples."""

    def __init__(
        self, env: dict[str, str], log: Path, queues: str, concurrency: int = 2, name: str = "f"
    ) -> None:
        super().__init__(env, log, queues, concurrency, name, pool="prefork")

    def children(self) -> list[int]:
        """The pool's process ids now."""
        out = subprocess.run(
            ["ps", "-o", "pid=", "--ppid", str(self.proc.pid)],
            capture_output=True,
            text=True,
            check=False,
        )
        return [int(p) for p in out.stdout.split()]
