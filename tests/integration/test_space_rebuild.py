"""`atommem space rebuild` and `space compare`, run as a user runs them: a rebuild killed
mid-way resumes and ends with the memory of an uninterrupted one; compare shows the
difference a changed setting made."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from common.settings import StoreSettings
from common.store.backends import open_store
from common.store.base import Kind
from tests.helpers.cli import argv, run
from tests.helpers.memory_dump import dump
from tests.helpers.samples import SAMPLE, TINY_LOCOMO
from workers.launch import ROOT

pytestmark = pytest.mark.integration

JACCARD = {**os.environ, "ATOMMEM_SIMILARITY__LEXICAL": "jaccard"}


def _source(data: Path) -> None:
    out = run(data, "ingest", "--create-space", "--space", "src", str(SAMPLE))
    assert out.returncode == 0, out.stderr


def done_jobs(journal: Path, space: str) -> int:
    """The finished jobs of `space` in the embedded journal."""
    try:
        with sqlite3.connect(journal) as db:
            rows = db.execute("SELECT body FROM jobs").fetchall()
    except sqlite3.OperationalError:
        return 0
    ours = [json.loads(row[0]) for row in rows]
    return sum(j["space"] == space and j["state"] == "done" for j in ours)


def versions(data: Path, space: str) -> set[str | None]:
    store = open_store(StoreSettings(qdrant_path=data / "qdrant"), 384)
    try:
        found = set()
        for kind in (Kind.FACTS, Kind.EVENTS, Kind.PROFILES):
            for point in store.scroll(kind, "default", space):
                version = point.payload.get("memory_version")
                found.add(version["settings_hash"] if version else None)
        return found
    finally:
        store.close()


def test_a_killed_rebuild_resumes_and_ends_as_an_uninterrupted_one(tmp_path: Path) -> None:
    reference, data = tmp_path / "reference", tmp_path / "interrupted"
    for where in (reference, data):
        _source(where)
    whole = run(reference, "space", "rebuild", "src", "--into", "copy")
    assert whole.returncode == 0, whole.stderr
    assert "copy: 4 sessions (0 unchanged)" in whole.stdout

    # One worker thread: the sessions commit one after another, so the kill lands after the
    # first job is done and before the last.
    env = {**os.environ, "ATOMMEM_BROKER__WORKER_CONCURRENCY": "1"}
    proc = subprocess.Popen(
        argv(data, "space", "rebuild", "src", "--into", "copy"),
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    journal = data / "coordination.sqlite"
    deadline = time.monotonic() + 240
    while done_jobs(journal, "copy") < 1 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.01)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(10)
    assert 1 <= done_jobs(journal, "copy") < 4, "the kill must land in the middle of the rebuild"

    resumed = run(data, "space", "rebuild", "src", "--into", "copy", env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert "copy: 4 sessions" in resumed.stdout
    assert done_jobs(journal, "copy") == 4
    assert dump(data / "qdrant", "default", ["copy"]) == dump(
        reference / "qdrant", "default", ["copy"]
    )
    # the source is untouched, and the rebuild holds what the source holds (same settings)
    assert dump(data / "qdrant", "default", ["src"]) == dump(
        reference / "qdrant", "default", ["src"]
    )
    assert versions(data, "copy") == versions(data, "src") and None not in versions(data, "copy")


def test_rebuild_refuses_a_space_holding_other_memory(tmp_path: Path) -> None:
    _source(tmp_path)
    other = tmp_path / "other.json"
    doc = json.loads(SAMPLE.read_text(encoding="utf-8"))
    doc["sessions"] = [{**doc["sessions"][0], "session_id": "elsewhere"}]
    other.write_text(json.dumps(doc), encoding="utf-8")
    assert run(tmp_path, "ingest", "--create-space", "--space", "busy", str(other)).returncode == 0
    refused = run(tmp_path, "space", "rebuild", "src", "--into", "busy")
    assert refused.returncode == 2
    assert "holds session 'elsewhere'" in refused.stderr
    assert run(tmp_path, "space", "rebuild", "src", "--into", "src").returncode == 2
    missing = run(tmp_path, "space", "rebuild", "nope", "--into", "x")
    assert missing.returncode == 2 and "space 'nope' does not exist" in missing.stderr


def test_space_compare_shows_counts_differences_versions_and_recall(tmp_path: Path) -> None:
    _source(tmp_path)
    rebuilt = run(tmp_path, "space", "rebuild", "src", "--into", "jac", env=JACCARD)
    assert rebuilt.returncode == 0, rebuilt.stderr

    text = run(tmp_path, "space", "compare", "src", "jac", "--show", "2")
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0].split() == ["src", "jac"]
    assert lines[1].split() == ["sessions", "4", "4"]
    assert "facts by normalised text: 28 in both, 0 only in src, 0 only in jac" in text.stdout
    assert "memory versions:" in text.stdout

    out = run(tmp_path, "space", "compare", "src", "jac", "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["a"]["counts"]["facts"] == report["b"]["counts"]["facts"] == 28
    (label_a,) = report["a"]["versions"]
    (label_b,) = report["b"]["versions"]
    assert label_a != label_b  # the lexical channel is a memory-shaping setting
    assert report["a"]["versions"][label_a]["facts"] == 28
    hashes = {report[s]["version_details"][label]["settings_hash"] for s, label in
              (("a", label_a), ("b", label_b))}  # fmt: skip
    assert len(hashes) == 2
    for diff in report["profiles"]:  # each listed difference is a real one
        assert diff["only_a"] or diff["only_b"]

    questions = tmp_path / "tiny.json"
    questions.write_text(json.dumps(TINY_LOCOMO), encoding="utf-8")
    assert (
        run(tmp_path, "ingest", "--create-space", "--format", "locomo", str(questions)).returncode
        == 0
    )
    assert run(tmp_path, "space", "rebuild", "tiny", "--into", "tiny2").returncode == 0
    scored = run(tmp_path, "space", "compare", "tiny", "tiny2", "--questions", str(questions),
                 "--k", "2", "--json")  # fmt: skip
    assert scored.returncode == 0, scored.stderr
    recall = json.loads(scored.stdout)["recall"]
    assert recall["k"] == 2
    for space in ("tiny", "tiny2"):
        row = recall["spaces"][space]
        assert row["questions"] == 3 and row["p50_ms"] > 0
    # the same configuration rebuilt the same memory: the same recall
    assert recall["spaces"]["tiny"]["recall"] == recall["spaces"]["tiny2"]["recall"]
    shown = run(tmp_path, "space", "compare", "tiny", "tiny2", "--questions", str(questions))
    assert shown.returncode == 0, shown.stderr
    assert "Recall@10" in shown.stdout and "p50 ms" in shown.stdout
