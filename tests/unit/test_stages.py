"""The queued stages: the per-chunk fan-in, and a drain that finishes only jobs that did the
work (a resubmitted job is left to its accept)."""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path

import pytest

from common.llm.transport import LLMError
from common.memory import commit, stages, verify
from common.memory.ingest import session_hash
from common.memory.stages import (
    Next,
    accept_stage,
    drain_stage,
    extract_stage,
    parked_drafts,
    profile_stage,
)
from common.models.jobs import AcceptPayload, ExtractPayload, Job
from common.models.plan import Plan
from common.models.session import SessionInput, Turn
from common.store import records
from common.store.coordination.chunks import ChunkParking
from common.store.coordination.liveness import JOB_LIVENESS
from common.store.coordination.roles import Coordination
from tests.helpers.contexts import make_ctx
from tests.helpers.doubles import unit
from tests.helpers.records import draft, queued_head, session_record


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


def _park(chunks: ChunkParking, chunk: int, of: int, texts: list[str], content: str = "") -> int:
    drafts = [
        draft(REC, text, unit(1, 0, 0, 0), ["k"], ["Ann"], index=i).model_dump(mode="json")
        for i, text in enumerate(texts)
    ]
    body = {"drafts": drafts, "session_hash": content}
    return chunks.put_chunk("t", "s", "s1", chunk, of, json.dumps(body))


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


def test_drafts_of_other_content_are_dropped_and_never_committed(tmp_path: Path) -> None:
    """A late extract of an erased job parks drafts of the old content after the session was
    submitted again with new content: the drain drops them and waits for the new ones."""
    ctx = make_ctx(tmp_path)
    coord = queued_head(ctx, REC, tmp_path / "c.sqlite")
    _park(coord.chunks, 0, 2, ["Ann moved to Oslo."], content=REC.content_hash)
    _park(coord.chunks, 1, 2, ["Ann's erased secret."], content="the erased content")
    assert parked_drafts(coord.chunks, "t", "s", "s1", REC.content_hash) is None
    assert coord.chunks.parked("t", "s", "s1") == {0: 2}  # the stale chunk is gone
    assert drain_stage(ctx, coord, "t", "s") == Next.NOTHING
    _park(coord.chunks, 1, 2, ["Ann adopted a cat."], content=REC.content_hash)
    assert drain_stage(ctx, coord, "t", "s") == Next.PROFILE
    assert coord.jobs.get_job("t", "j1").counts["facts_in"] == 2  # type: ignore[union-attr]
    assert not any("secret" in f.text for f in ctx.index("t", "s").facts.items())


def test_drain_commits_the_head_once_its_last_chunk_is_parked(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    coord = queued_head(ctx, REC, tmp_path / "c.sqlite")
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


def _coord_with_job(tmp_path: Path, state: str, payload: str = "{}") -> Coordination:
    coord = Coordination.sqlite(tmp_path / "c.sqlite")
    now = time.time()
    job = Job(
        job_id="j1", tenant="t", space="s", session_id="s1", state=state,  # type: ignore[arg-type]
        created_at=now, updated_at=now,
    )  # fmt: skip
    coord.jobs.put_job(job, payload)
    coord.sequence.register("t", "s", "s1", 0)
    return coord


def test_a_commit_resumed_after_a_crash_reports_the_sessions_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx = make_ctx(tmp_path)
    records.put_session(ctx.store, REC.model_copy(update={"status": "accepted", "job_id": "j1"}))
    coord = _coord_with_job(tmp_path, "extracting")
    _park(coord.chunks, 0, 1, ["Ann adopted a cat.", "Ann moved to Oslo."])

    def crash(*_: object) -> None:
        raise RuntimeError("worker killed while applying the plan")

    monkeypatch.setattr(commit, "apply_plan", crash)
    with pytest.raises(RuntimeError):
        drain_stage(ctx, coord, "t", "s")
    monkeypatch.undo()
    assert drain_stage(ctx, coord, "t", "s") == Next.PROFILE  # resumes the recorded plan
    assert profile_stage(ctx, coord, "t", "s", "s1") == Next.DRAIN
    job = coord.jobs.get_job("t", "j1")
    assert job is not None and job.state == "done"
    assert job.counts["turns"] == 1 and job.counts["facts_in"] == 2
    assert job.counts["facts_stored"] + job.counts["duplicates_dropped"] == 2


def _accept(session: SessionInput) -> AcceptPayload:
    return AcceptPayload(enqueued_at=0.0, job_id="j1", tenant="t", space="s", session=session)


def test_accept_never_lets_a_second_payload_replace_the_jobs(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    first = _accept(REC.session)
    other = REC.session.model_copy(
        update={"turns": [Turn(id="s1:0", speaker="Ann", text="something else entirely")]}
    )
    coord = _coord_with_job(tmp_path, "queued", first.model_dump_json())
    assert accept_stage(ctx, coord, _accept(other)) is None
    assert records.get_session(ctx.store, "t", "s", "s1") is None  # nothing stored
    assert coord.jobs.job_payload("t", "j1") == first.model_dump_json()
    todo = accept_stage(ctx, coord, first)  # the job's own payload goes ahead
    assert todo and todo[0].session.turns[0].text == "placeholder text"


def test_accept_over_a_done_session_reports_its_counts_to_the_job_doing_it(
    tmp_path: Path,
) -> None:
    ctx = make_ctx(tmp_path)
    stats = {"turns": 1, "facts_in": 3, "facts_stored": 3}
    rec = REC.model_copy(update={"status": "done", "stats": stats, "job_id": "j1"})
    records.put_session(
        ctx.store, rec.model_copy(update={"content_hash": session_hash(REC.session)})
    )
    coord = _coord_with_job(tmp_path, "extracting", _accept(REC.session).model_dump_json())
    assert accept_stage(ctx, coord, _accept(REC.session)) is None
    job = coord.jobs.get_job("t", "j1")
    assert job is not None and job.state == "done"
    assert job.counts == stats and not job.unchanged


def test_a_long_extraction_keeps_its_job_marked_alive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """However a chunk's extraction is run (its own task or a fair-lane step), the job stays
    alive for the sweep while the model works."""
    ctx = make_ctx(tmp_path)
    touched: list[tuple[str, list[str]]] = []

    def slow_draft(*_: object) -> list[object]:
        time.sleep(0.5)
        return []

    monkeypatch.setattr(stages, "draft_session", slow_draft)
    JOB_LIVENESS.configure(lambda tenant, ids: touched.append((tenant, ids)), every_s=0.1)
    try:
        chunk = ExtractPayload(
            enqueued_at=0.0, job_id="j1", tenant="t", space="s", session=REC.session,
            context_turns=0, chunk=0, chunks=1,
        )  # fmt: skip
        assert extract_stage(ctx, Coordination.sqlite(tmp_path / "c.sqlite").chunks, chunk)
    finally:
        JOB_LIVENESS.configure(None)
    assert ("t", ["j1"]) in touched


def test_a_commit_whose_lock_lapsed_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The holder stalled past its lock's TTL and another worker took the space: the stage
    must not write its plan over the new holder's work."""
    ctx = make_ctx(tmp_path)
    coord = queued_head(ctx, REC, tmp_path / "c.sqlite")
    _park(coord.chunks, 0, 1, ["Ann adopted a cat."])
    real_verify = verify.place_fact  # what commit calls, by its own name

    def stall_then_lose_the_lock(*args: object, **kwargs: object) -> object:
        coord.locks.release("t", "s", coord_token(coord))  # the TTL ran out...
        assert coord.locks.acquire("t", "s", "successor", 30_000)  # ...another took it
        return real_verify(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(commit, "place_fact", stall_then_lose_the_lock)
    assert drain_stage(ctx, coord, "t", "s") == Next.BUSY
    stored = records.get_session(ctx.store, "t", "s", "s1")
    assert stored is not None and stored.status == "accepted" and stored.plan is None
    assert ctx.index("t", "s").facts.items() == []
    assert coord.locks.holds("t", "s", "successor")  # its release left the successor alone
    coord.close()


def coord_token(coord: Coordination) -> str:
    """The token holding the space's lock now (the drain's own, taken inside it)."""
    token = coord.locks._j.one("SELECT token FROM locks WHERE tenant='t' AND space='s'")  # type: ignore[attr-defined]
    return str(token)


def test_a_profile_batch_never_finishes_a_head_that_was_not_committed(tmp_path: Path) -> None:
    """The drain that committed a session reads the head again after its lock: if the head
    has moved on meanwhile (an erasure, a failure) to a session only accepted, the profile
    stage leaves it to its own drain rather than mark it done."""
    ctx = make_ctx(tmp_path)
    accepted = REC.model_copy(update={"job_id": "j1"})
    coord = queued_head(ctx, accepted, tmp_path / "c.sqlite")
    assert profile_stage(ctx, coord, "t", "s", "s1") == Next.DRAIN
    assert coord.sequence.head("t", "s") == "s1"  # still waiting for its commit
    stored = records.get_session(ctx.store, "t", "s", "s1")
    assert stored is not None and stored.status == "accepted"
    job = coord.jobs.get_job("t", "j1")
    assert job is not None and job.state != "done"


def test_an_accept_sent_again_while_its_session_commits_never_sets_it_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sweep sent a job waiting in a long backlog again; its accept read the session
    record (accepted) just before the lock's holder committed and profiled the session. The
    accept must not write that read back: the session would be committed and profiled a
    second time (a profile's history held one session's candidates twice)."""
    ctx = make_ctx(tmp_path)
    rec = REC.model_copy(update={"content_hash": session_hash(REC.session)})
    coord = queued_head(ctx, rec, tmp_path / "c.sqlite")
    coord.jobs.put_job(coord.jobs.get_job("t", "j1"), _accept(REC.session).model_dump_json())  # type: ignore[arg-type]
    _park(coord.chunks, 0, 1, ["Ann adopted a cat.", "Ann moved to Oslo."])
    real_get = records.get_session
    raced: list[bool] = []

    def read_then_the_holder_finishes(*args: object) -> object:
        read = real_get(*args)  # type: ignore[arg-type]
        if not raced:
            raced.append(True)
            assert drain_stage(ctx, coord, "t", "s") == Next.PROFILE
            assert profile_stage(ctx, coord, "t", "s", "s1") == Next.DRAIN
        return read

    monkeypatch.setattr(records, "get_session", read_then_the_holder_finishes)
    assert not accept_stage(ctx, coord, _accept(REC.session))  # nothing left to extract
    monkeypatch.undo()
    stored = records.get_session(ctx.store, "t", "s", "s1")
    assert stored is not None and stored.status == "done"
    job = coord.jobs.get_job("t", "j1")
    assert job is not None and job.state == "done" and job.counts["facts_in"] == 2
    assert coord.sequence.head("t", "s") is None
    assert drain_stage(ctx, coord, "t", "s") == Next.NOTHING  # nothing to commit again


def test_an_accept_leaves_a_recorded_plan_to_the_locked_drain(tmp_path: Path) -> None:
    """A stage recorded its plan and was interrupted (or is applying it now, under the lock):
    the accept sent again neither applies the plan nor rewrites the record."""
    ctx = make_ctx(tmp_path)
    rec = REC.model_copy(update={"content_hash": session_hash(REC.session)})
    coord = queued_head(ctx, rec, tmp_path / "c.sqlite")
    coord.jobs.put_job(coord.jobs.get_job("t", "j1"), _accept(REC.session).model_dump_json())  # type: ignore[arg-type]
    planned = rec.model_copy(
        update={"status": "committing", "job_id": "j1", "plan": Plan(points=[])}
    )
    records.put_session(ctx.store, planned)
    assert accept_stage(ctx, coord, _accept(REC.session)) == []
    assert records.get_session(ctx.store, "t", "s", "s1") == planned
    assert coord.jobs.get_job("t", "j1").state == "committing"  # type: ignore[union-attr]


def test_an_accept_sent_again_extracts_nothing_when_the_holder_is_between_profile_and_done(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The profile stage dropped the session's parked chunks and has not marked the job done
    yet when the accept, on a record read before the commit, asks for its chunks: none may
    be extracted again (paid model calls, and chunks parked for nobody)."""
    ctx = make_ctx(tmp_path)
    rec = REC.model_copy(update={"content_hash": session_hash(REC.session)})
    coord = queued_head(ctx, rec, tmp_path / "c.sqlite")
    coord.jobs.put_job(coord.jobs.get_job("t", "j1"), _accept(REC.session).model_dump_json())  # type: ignore[arg-type]
    _park(coord.chunks, 0, 1, ["Ann adopted a cat.", "Ann moved to Oslo."])
    real_get, real_update = records.get_session, coord.jobs.update_job
    held: list[dict[str, object]] = []
    raced: list[bool] = []

    def done_held_back(tenant: str, job_id: str, reopen: bool = False, **fields: object) -> object:
        if fields.get("state") == "done" and not held:
            held.append(fields)  # written after the accept has run
            return None
        return real_update(tenant, job_id, reopen, **fields)

    def read_then_the_holder_runs(*args: object) -> object:
        read = real_get(*args)  # type: ignore[arg-type]
        if not raced:
            raced.append(True)
            assert drain_stage(ctx, coord, "t", "s") == Next.PROFILE
            with monkeypatch.context() as patch:
                patch.setattr(coord.jobs, "update_job", done_held_back)
                assert profile_stage(ctx, coord, "t", "s", "s1") == Next.DRAIN
        return read

    monkeypatch.setattr(records, "get_session", read_then_the_holder_runs)
    assert not accept_stage(ctx, coord, _accept(REC.session))
    monkeypatch.undo()
    real_update("t", "j1", **held[0])  # type: ignore[arg-type]
    assert coord.chunks.parked("t", "s", "s1") == {}
    job = coord.jobs.get_job("t", "j1")
    assert job is not None and job.state == "done"
