"""A private `redis-server` for fault tests: its own port and directory, with persistence, so a
test can kill it (-9), stop it cleanly and start it again without touching the shared Redis."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import redis

from tests.helpers.ports import free_port
from tests.helpers.skips import unavailable


class RedisServer:
    """`redis-server` on 127.0.0.1:<free port>, data in `directory`, AOF `everysec` by default
    (as the shipped deployment runs it)."""

    def __init__(self, directory: Path, appendonly: bool = True, port: int | None = None) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed")
        self.binary = binary
        self.directory = directory
        self.directory.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.appendonly = appendonly
        self.proc: subprocess.Popen[bytes] | None = None

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def client(self, db: int = 0) -> redis.Redis:
        return redis.Redis.from_url(self.url(db), decode_responses=True)

    def start(self, timeout: float = 10.0) -> RedisServer:
        args = [
            self.binary,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(self.directory),
            "--save",
            "",
            "--appendonly",
            "yes" if self.appendonly else "no",
            "--appendfsync",
            "everysec",
            "--maxmemory-policy",
            "noeviction",
        ]
        log = (self.directory / "redis.log").open("ab")
        self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                probe = self.client()
                probe.ping()
                probe.close()
                return self
            except (redis.ConnectionError, redis.BusyLoadingError):
                time.sleep(0.05)
        raise TimeoutError(f"redis-server on port {self.port} did not start")

    def kill(self) -> None:
        """SIGKILL: no shutdown save; what survives is what the AOF had fsynced."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.proc = None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None


def start_redis(directory: Path, appendonly: bool = True) -> RedisServer:
    """A private server, started; where `redis-server` is not installed the test skips (and
    fails under CI)."""
    if shutil.which("redis-server") is None:
        unavailable("redis-server is not installed")
    return RedisServer(directory, appendonly=appendonly).start()
