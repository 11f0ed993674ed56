"""Erasure as a user runs it, on the embedded store: what it removed is gone from the store's
segment files too, not only from what the store answers."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.cli import run
from tests.helpers.samples import SAMPLE

pytestmark = pytest.mark.integration


def _segments_hold(data: Path, needle: bytes) -> list[str]:
    segments = data / "qdrant" / "shard" / "segments"
    return [str(f) for f in segments.rglob("*") if f.is_file() and needle in f.read_bytes()]


def test_an_erased_session_leaves_the_segment_files(tmp_path: Path) -> None:
    assert run(tmp_path, "space", "create", "demo").returncode == 0
    assert run(tmp_path, "ingest", str(SAMPLE)).returncode == 0
    # "beagle" is said once, in session s1 (its raw turn, its fact, what was built on it)
    assert _segments_hold(tmp_path, b"beagle")
    erased = run(tmp_path, "delete", "--space", "demo", "--session", "s1")
    assert erased.returncode == 0, erased.stderr
    hits = run(tmp_path, "search", "--space", "demo", "--json", "Who adopted a beagle puppy?")
    assert hits.returncode == 0 and "beagle" not in hits.stdout.lower()
    assert _segments_hold(tmp_path, b"beagle") == []
    # the owner's lock file names the program, never its arguments (the question above)
    assert b"beagle" not in (tmp_path / "qdrant" / "owner.lock").read_bytes()
