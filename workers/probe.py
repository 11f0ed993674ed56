"""The worker's probe file, for container probes: touched by the consumer loop when the worker
is ready and on each of Celery's own worker heartbeats, read by
`python -m workers.probe --max-age SECONDS` (exit 0 when fresh). Standard library only, so a
probe starts in milliseconds and never imports Celery or the embedding model."""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path


def probe_path() -> Path:
    """One file per container (each has its own temp folder); TMPDIR moves it."""
    return Path(tempfile.gettempdir()) / "atommem-worker.alive"


def mark_alive(path: Path | None = None) -> None:
    """Mark the worker alive now."""
    (path or probe_path()).touch()


def age(path: Path | None = None, now: float | None = None) -> float | None:
    """Seconds since the worker was last marked alive; None when it never was."""
    try:
        mtime = (path or probe_path()).stat().st_mtime
    except FileNotFoundError:
        return None
    return max(0.0, (time.time() if now is None else now) - mtime)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m workers.probe",
        description="Exit 0 when this container's worker was alive within --max-age seconds.",
    )
    parser.add_argument("--max-age", type=float, required=True, help="seconds")
    parser.add_argument("--path", type=Path, default=None, help="the probe file")
    args = parser.parse_args(argv)
    seconds = age(args.path)
    if seconds is None:
        print("no probe file yet: the worker has not connected to the broker", file=sys.stderr)
        return 1
    if seconds > args.max_age:
        print(f"worker last alive {seconds:.0f} s ago (over {args.max_age:g} s)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
