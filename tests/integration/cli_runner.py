"""The `atommem` command run as a user runs it, in a subprocess, on a data directory."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SAMPLE = Path(__file__).resolve().parents[2] / "cli" / "samples" / "sample_conversation.json"


def run(
    data: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli", "--quiet", "--data-dir", str(data), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=env,
    )
