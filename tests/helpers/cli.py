"""The `atommem` command run as a user runs it, in a subprocess, on a data directory."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def argv(data: Path, *args: str) -> list[str]:
    """The command line of `atommem --quiet --data-dir DATA ARGS...` in this interpreter."""
    return [sys.executable, "-m", "cli", "--quiet", "--data-dir", str(data), *args]


def run(
    data: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv(data, *args), capture_output=True, text=True, timeout=300, check=False, env=env
    )
