from bench.first_pass import run_drafts, run_size
from common.store import bfloat16_rows


def test_a_small_run_keeps_few_rows_and_the_exact_top_k() -> None:
    # the harness times both paths over the same index and checks their top k against each
    # other: on a small space too (the copy is made whatever the size)
    assert bfloat16_rows.wait_for_torch(60) is not None
    row = run_size(800, questions=6, k=5, seed=3)
    assert row["top_k_differs"] == 0
    assert row["rows_kept"]["max"] < 800  # the first pass ruled rows out on every question
    assert set(row["top_k_ms"]) == {"first_pass", "float32", "scan"}


def test_a_commits_batch_is_timed_both_ways_with_the_same_top_k() -> None:
    assert bfloat16_rows.wait_for_torch(60) is not None
    (row,) = run_drafts(800, [4], rounds=2, k=10, seed=5)
    assert row["drafts"] == 4 and row["rounds"] == 2
    assert row["top_k_lists_differing"] == 0
    assert set(row["batch_ms"]) == {"first_pass", "float32"}
