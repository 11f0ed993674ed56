"""An embedded run killed mid-ingest finishes from its journal with `atommem resume`."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from tests.helpers.cli import argv
from tests.helpers.memory_dump import differences, dump
from tests.helpers.workers import embedded_reference
from workers.launch import ROOT

pytestmark = pytest.mark.integration


def done_jobs(journal: Path) -> int:
    if not journal.exists():
        return 0
    try:
        with sqlite3.connect(journal) as db:
            rows = db.execute("SELECT body FROM jobs").fetchall()
    except sqlite3.OperationalError:
        return 0
    return sum('"state":"done"' in row[0] for row in rows)


def test_interrupted_embedded_ingest_resumes_from_its_journal(tmp_path: Path, locomo: Path) -> None:
    conv = locomo / "atommem_facts" / "conv-30.json"
    reference = tmp_path / "reference"
    embedded_reference(reference, [conv])

    data = tmp_path / "interrupted"
    proc = subprocess.Popen(
        argv(data, "ingest", "--create-space", str(conv)),
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    journal = data / "coordination.sqlite"
    deadline = time.monotonic() + 300
    while done_jobs(journal) < 3 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(10)
    assert 3 <= done_jobs(journal) < 19, "the kill must land in the middle of the ingest"

    resumed = subprocess.run(
        argv(data, "resume"), cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming" in resumed.stderr
    assert done_jobs(journal) == 19
    got = dump(data / "qdrant", "default", ["conv-30"])
    want = dump(reference / "qdrant", "default", ["conv-30"])
    assert got == want, differences(got, want)
