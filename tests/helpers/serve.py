"""`atommem serve` as a test starts it: a subprocess on a free port, its log beside its data,
and the key its first start wrote."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.helpers.ports import free_port
from tests.helpers.stack import until_ready
from workers.launch import ROOT


@dataclass
class Served:
    url: str
    log: Path
    key_file: Path
    proc: subprocess.Popen[bytes]

    def key(self) -> str:
        return self.key_file.read_text().strip()


@contextmanager
def serving(data: Path, cwd: Path = ROOT) -> Iterator[Served]:
    """`atommem --data-dir DATA serve` on a free port, with no broker in its environment; run
    in `cwd` with no `--data-dir` when DATA is `cwd/.atommem`, the default."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ATOMMEM_")}
    env["PYTHONPATH"] = str(ROOT)
    port = free_port()
    log = data.parent / f"{data.name}-serve.log"
    where = [] if data == cwd / ".atommem" else ["--data-dir", str(data)]
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "cli", *where, "serve", "--port", str(port)],
            cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        until_ready(f"{url}/readyz", proc, log, "atommem serve", timeout=120)
        yield Served(url=url, log=log, key_file=data / "api_key", proc=proc)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.wait(60)
