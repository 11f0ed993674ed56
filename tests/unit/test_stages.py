"""The drain finishes only jobs that did the work; a resubmitted job is left to its accept."""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path

import pytest

from common.memory.stages import Next, drain_stage
from common.models.jobs import Job
from common.store import records
from common.store.coordination import SqliteCoordinator
from tests.helpers import make_ctx, session_record


@pytest.mark.parametrize(
    ("state", "finished"), [("queued", False), ("profiling", True), ("committing", True)]
)
def test_drain_over_a_session_already_done(tmp_path: Path, state: str, finished: bool) -> None:
    ctx = make_ctx(tmp_path)
    rec = session_record("s1", 0, datetime(2024, 3, 1), ["Ann"]).model_copy(
        update={"status": "done", "stats": {"facts_in": 3, "facts_stored": 3}, "job_id": "j1"}
    )
    records.put_session(ctx.store, rec)
    coord = SqliteCoordinator(tmp_path / "c.sqlite")
    now = time.time()
    job = Job(
        job_id="j1", tenant="t", space="s", session_id="s1", state=state,  # type: ignore[arg-type]
        created_at=now, updated_at=now,
    )  # fmt: skip
    coord.put_job(job, "{}")
    coord.register("t", "s", "s1", 0)

    assert drain_stage(ctx, coord, "t", "s") == Next.DRAIN
    assert coord.head("t", "s") is None  # the sequence moves on either way
    after = coord.get_job("t", "j1")
    assert after is not None
    if finished:  # interrupted after its own work: finished with the session's counts
        assert after.state == "done" and after.counts == {"facts_in": 3, "facts_stored": 3}
    else:  # a resubmission: untouched, its accept will report it unchanged
        assert after.state == "queued" and after.counts == {}
