"""Erasure as a user runs it, on the embedded store: what it removed is gone from every file
under the data directory (the store's segments and write-ahead log, its saved indexes, the
SQLite journal and its log), not only from what the store answers; and it stays gone after
the store is closed and opened again."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.cli import run
from tests.helpers.samples import SAMPLE

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def _holding(data: Path, needle: bytes) -> dict[str, int]:
    """Every file under `data` (all of them: wal/ too) that holds `needle`, with its count."""
    found = {}
    for path in sorted(data.rglob("*")):
        if path.is_file() and (n := path.read_bytes().count(needle)):
            found[str(path.relative_to(data))] = n
    return found


def _ok(data: Path, *args: str) -> str:
    done = run(data, *args)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_an_erased_session_leaves_no_file_of_the_data_directory(tmp_path: Path) -> None:
    _ok(tmp_path, "space", "create", "demo")
    _ok(tmp_path, "ingest", str(SAMPLE))
    # "beagle" is said once, in session s1 (its raw turn, its fact, what was built on it)
    before = _holding(tmp_path, b"beagle")
    assert any("/wal/" in name for name in before), before  # the log held it too
    _ok(tmp_path, "delete", "--space", "demo", "--session", "s1")
    assert _holding(tmp_path, b"beagle") == {}
    hits = _ok(tmp_path, "search", "--space", "demo", "--json", "Who adopted a beagle puppy?")
    assert "beagle" not in hits.lower()
    assert "Zion" in _ok(tmp_path, "facts", "--space", "demo")  # the other sessions stay
    # after a graceful close (each command above) and another open and close
    _ok(tmp_path, "stats")
    assert _holding(tmp_path, b"beagle") == {}
    # the owner's lock file names the program, never its arguments (the question above)
    assert b"beagle" not in (tmp_path / "qdrant" / "owner.lock").read_bytes()


def test_an_erased_space_leaves_no_file_of_the_data_directory(tmp_path: Path) -> None:
    _ok(tmp_path, "space", "create", "demo")
    _ok(tmp_path, "ingest", str(SAMPLE))
    _ok(tmp_path, "space", "create", "kept")
    words = (b"beagle", b"pottery", b"Zion", b"Anika")
    assert all(_holding(tmp_path, w) for w in words)
    _ok(tmp_path, "delete", "--space", "demo", "--everything")
    assert {w: _holding(tmp_path, w) for w in words} == {w: {} for w in words}
    assert "kept" in _ok(tmp_path, "space", "list")
    _ok(tmp_path, "stats")
    assert {w: _holding(tmp_path, w) for w in words} == {w: {} for w in words}


# The admin task as the CLI runs it, with the store's compaction refused (as on a disk that
# cannot hold the shard's rewrite; the store-level faults are real in
# tests/unit/test_store_faults.py).
REFUSING_COMPACTION = """
import sys
from common.store.base import StoreUnavailable
from common.store.edge import EdgeStore

def refuse(self):
    raise StoreUnavailable("compacting the store refused: 1 MiB free on its disk")

EdgeStore.compact = refuse
from cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def test_an_erasure_whose_compaction_fails_is_not_acknowledged(tmp_path: Path) -> None:
    _ok(tmp_path, "space", "create", "demo")
    _ok(tmp_path, "ingest", str(SAMPLE))
    command = [sys.executable, "-c", REFUSING_COMPACTION, "--quiet", "--data-dir", str(tmp_path)]
    done = subprocess.run(
        [*command, "delete", "--space", "demo", "--session", "s1"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout
    assert "compacting the store refused" in done.stderr
    assert str(tmp_path) not in done.stderr
    # the erasure's writes are durable; its rerun compacts, and then it is acknowledged
    assert "beagle" not in _ok(tmp_path, "facts", "--space", "demo").lower()
    assert _holding(tmp_path, b"beagle")
    _ok(tmp_path, "delete", "--space", "demo", "--everything")
    assert _holding(tmp_path, b"beagle") == {}
