"""The queued stages: the per-chunk fan-in, and a drain that finishes only jobs that did the
work (a resubmitted job is left to its accept)."""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path

import pytest

from common.llm.transport import LLMError
from common.memory.stages import Next, drain_stage, parked_drafts, profile_stage
from common.models.jobs import Job
from common.store import records
from common.store.coordination import ChunkParking, Coordination
from tests.helpers import draft, make_ctx, session_record, unit


@pytest.mark.parametrize(
    ("state", "finished"), [("queued", False), ("profiling", True), ("committing", True)]
)
def test_drain_over_a_session_already_done(tmp_path: Path, state: str, finished: bool) -> None:
    ctx = make_ctx(tmp_path)
    rec = session_record("s1", 0, datetime(2024, 3, 1), ["Ann"]).model_copy(
        update={"status": "done", "stats": {"facts_in": 3, "facts_stored": 3}, "job_id": "j1"}
    )
    records.put_session(ctx.store, rec)
    coord = Coordination.sqlite(tmp_path / "c.sqlite")
    now = time.time()
    job = Job(
        job_id="j1", tenant="t", space="s", session_id="s1", state=state,  # type: ignore[arg-type]
        created_at=now, updated_at=now,
    )  # fmt: skip
    coord.jobs.put_job(job, "{}")
    coord.sequence.register("t", "s", "s1", 0)

    assert drain_stage(ctx, coord, "t", "s") == Next.DRAIN
    assert coord.sequence.head("t", "s") is None  # the sequence moves on either way
    after = coord.jobs.get_job("t", "j1")
    assert after is not None
    if finished:  # interrupted after its own work: finished with the session's counts
        assert after.state == "done" and after.counts == {"facts_in": 3, "facts_stored": 3}
    else:  # a resubmission: untouched, its accept will report it unchanged
        assert after.state == "queued" and after.counts == {}


def _park(chunks: ChunkParking, chunk: int, of: int, texts: list[str]) -> int:
    drafts = [
        draft(REC, text, unit(1, 0, 0, 0), ["k"], ["Ann"], index=i).model_dump(mode="json")
        for i, text in enumerate(texts)
    ]
    return chunks.put_chunk("t", "s", "s1", chunk, of, json.dumps({"drafts": drafts}))


REC = session_record("s1", 0, datetime(2024, 3, 1), ["Ann"])


def test_parked_chunks_count_once_and_assemble_in_chunk_order(tmp_path: Path) -> None:
    chunks = Coordination.sqlite(tmp_path / "c.sqlite").chunks
    assert parked_drafts(chunks, "t", "s", "s1") is None
    assert _park(chunks, 2, 3, ["third"]) == 1
    assert _park(chunks, 0, 3, ["first a", "first b"]) == 2
    assert _park(chunks, 0, 3, ["first a", "first b"]) == 2  # a redelivered chunk counts once
    assert parked_drafts(chunks, "t", "s", "s1") is None  # chunk 1 is still out
    assert _park(chunks, 1, 3, []) == 3  # a chunk with no facts still completes the set
    parked = parked_drafts(chunks, "t", "s", "s1")
    assert parked is not None
    assert [d.text for d in parked[0]] == ["first a", "first b", "third"]


def test_drain_commits_the_head_once_its_last_chunk_is_parked(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    records.put_session(ctx.store, REC.model_copy(update={"status": "accepted", "job_id": "j1"}))
    coord = Coordination.sqlite(tmp_path / "c.sqlite")
    now = time.time()
    job = Job(
        job_id="j1", tenant="t", space="s", session_id="s1", state="extracting",
        created_at=now, updated_at=now,
    )  # fmt: skip
    coord.jobs.put_job(job, "{}")
    coord.sequence.register("t", "s", "s1", 0)
    _park(coord.chunks, 1, 2, ["Ann adopted a cat."])
    assert drain_stage(ctx, coord, "t", "s") == Next.NOTHING  # chunk 0 not parked yet
    assert coord.jobs.get_job("t", "j1").state == "extracting"  # type: ignore[union-attr]
    _park(coord.chunks, 0, 2, ["Ann moved to Oslo."])
    assert drain_stage(ctx, coord, "t", "s") == Next.PROFILE
    after = coord.jobs.get_job("t", "j1")
    assert after is not None and after.state == "profiling"
    assert after.counts["facts_in"] == 2


def test_a_failed_profile_batch_fails_the_job_and_frees_the_space(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    ctx.settings.llm.skip_rules = False  # so the batch calls the backend with nothing pending

    def broken(facts: list[object]) -> list[object]:
        raise LLMError("LLM stage 'profile_extract' failed after 3 tries: HTTP 503")

    ctx.backend.profile_candidates = broken  # type: ignore[method-assign,assignment]
    records.put_session(ctx.store, REC.model_copy(update={"status": "committed", "job_id": "j1"}))
    coord = Coordination.sqlite(tmp_path / "c.sqlite")
    now = time.time()
    job = Job(
        job_id="j1", tenant="t", space="s", session_id="s1", state="profiling",
        created_at=now, updated_at=now,
    )  # fmt: skip
    coord.jobs.put_job(job, "{}")
    coord.sequence.register("t", "s", "s1", 0)
    assert profile_stage(ctx, coord, "t", "s", "s1") == Next.DRAIN
    after = coord.jobs.get_job("t", "j1")
    assert after is not None and after.state == "failed"
    assert after.reason is not None and "profile batch: LLM stage 'profile_extract'" in after.reason
    assert coord.sequence.head("t", "s") is None  # the space moves on
    stored = records.get_session(ctx.store, "t", "s", "s1")
    assert stored is not None and stored.status == "committed"  # a retry resumes here
