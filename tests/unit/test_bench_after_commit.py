import json
from pathlib import Path

from bench.after_commit import main


def test_questions_are_timed_after_each_commit_and_the_filled_space_is_kept(
    tmp_path: Path,
) -> None:
    # a small space through the real pipeline in a child process: each session ingested is
    # followed by two timed questions, and the filled space is left for the next run
    out = tmp_path / "after_commit.json"
    args = ["--size", "600", "--sessions", "2", "--data-dir", str(tmp_path), "--out", str(out)]
    assert main(args) == 0
    row = json.loads(out.read_text())
    assert row["fill"]["facts"] == 600 and row["sessions"] == 2
    assert 0 < row["next_question_ms"]["p50"] <= row["next_question_ms"]["max"]
    assert row["first_after_commit_ms"]["p50"] > 0
    assert not (tmp_path / "round").exists()
    assert main([*args[:2], "--sessions", "1", *args[4:]]) == 0
    again = json.loads(out.read_text())
    assert again["fill"] == "reused" and again["sessions"] == 1
