from bench.first_pass import run_size
from common.store import bfloat16_rows


def test_a_small_run_keeps_few_rows_and_the_exact_top_k() -> None:
    # the harness times both paths over the same index and checks their top k against each
    # other: on a small space too (the copy is made whatever the size)
    assert bfloat16_rows.wait_for_torch(60) is not None
    row = run_size(800, questions=6, k=5, seed=3)
    assert row["top_k_differs"] == 0
    assert row["rows_kept"]["max"] < 800  # the first pass ruled rows out on every question
    assert set(row["top_k_ms"]) == {"first_pass", "float32", "scan"}
