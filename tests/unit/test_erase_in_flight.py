"""Erasing a session still being ingested: one with no memory yet is cancelled at once (job
failed as erased, out of the sequence, drafts, payload and record gone), the job's tasks still
running bring nothing back, and the session can be submitted again as a new job; one whose
memory is being written is refused."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
from celery import Celery

from common.context import MemoryContext
from common.errors import Conflict
from common.memory.admin import administer
from common.memory.stages import (
    ERASED,
    Next,
    abandoned,
    accept_stage,
    drain_stage,
    extract_payloads,
    extract_stage,
)
from common.models import ids
from common.models.jobs import AcceptPayload, AdminPayload, Job
from common.models.responses import ErasureReceipt
from common.models.session import SessionInput, Turn
from common.producer import Producer
from common.retrieval.pending import pending_sessions
from common.store import records
from common.store.coordination.roles import Coordination
from tests.helpers.contexts import make_ctx
from tests.helpers.redis import flushed, shared_url

REDIS_URL = shared_url(__name__)


def _session(session_id: str, text: str = "I moved to Denver last month.") -> SessionInput:
    return SessionInput(
        session_id=session_id,
        started_at=datetime(2024, 6, 1, 10, 0),
        participants=["Ann", "Bob"],
        turns=[Turn(speaker="Ann", text=text), Turn(speaker="Bob", text="Congratulations!")],
    )


def _submit(coord: Coordination, session: SessionInput) -> AcceptPayload:
    """What the producer does: claim the job with its payload, take a place in the sequence."""
    now = time.time()
    job = Job(
        job_id=ids.job_id("t", "s", session.session_id), tenant="t", space="s",
        session_id=session.session_id, created_at=now, updated_at=now,
    )  # fmt: skip
    payload = AcceptPayload(
        enqueued_at=0.0, job_id=job.job_id, tenant="t", space="s", session=session
    )
    assert coord.jobs.claim_job(job, payload.model_dump_json()) is None
    coord.sequence.register("t", "s", session.session_id, session.order)
    return payload


def _erase(ctx: MemoryContext, coord: Coordination, session_id: str) -> dict[str, list[str]]:
    body = AdminPayload(
        enqueued_at=0.0, tenant="t", space="s", op="erase_session", item_id=session_id
    )
    receipt = administer(ctx, coord, body)
    assert isinstance(receipt, ErasureReceipt)
    return receipt.erased.model_dump()


def _gone(ctx: MemoryContext, coord: Coordination, payload: AcceptPayload) -> None:
    job = coord.jobs.get_job("t", payload.job_id)
    assert job is not None and job.state == "failed" and job.reason == ERASED
    assert coord.jobs.job_payload("t", payload.job_id) is None
    assert payload.job_id not in {j.job_id for j in coord.jobs.open_jobs()}
    assert coord.sequence.pending("t", "s") == []
    assert coord.chunks.parked("t", "s", payload.session.session_id) == {}
    assert records.get_session(ctx.store, "t", "s", payload.session.session_id) is None
    assert pending_sessions(ctx.store, coord.jobs, coord.sequence, "t", "s") == []


def test_a_queued_or_accepted_session_is_cancelled_by_its_erasure(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    coord = Coordination.sqlite(tmp_path / "c.sqlite")
    queued = _submit(coord, _session("queued"))
    assert _erase(ctx, coord, "queued")["sessions_deleted"] == ["queued"]
    _gone(ctx, coord, queued)

    extracting = _submit(coord, _session("extracting"))
    (chunk,) = accept_stage(ctx, coord, extracting) or []
    extract_stage(ctx, coord.chunks, chunk)  # its drafts parked, not committed yet
    assert records.get_session(ctx.store, "t", "s", "extracting") is not None
    assert _erase(ctx, coord, "extracting")["sessions_deleted"] == ["extracting"]
    _gone(ctx, coord, extracting)
    coord.close()


def test_the_jobs_tasks_still_in_flight_bring_nothing_back(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    coord = Coordination.sqlite(tmp_path / "c.sqlite")
    payload = _submit(coord, _session("s1"))
    (chunk,) = extract_payloads(ctx, payload.job_id, "t", "s", payload.session)
    _erase(ctx, coord, "s1")
    # an extract that was running parks its drafts after the erasure's drop: it checks the
    # job after parking and takes them out again
    assert extract_stage(ctx, coord.chunks, chunk)
    assert abandoned(coord, chunk)
    # the accept still queued (put back in the sequence by a sweep that read the job just
    # before the erasure) stores nothing and leaves the sequence
    coord.sequence.register("t", "s", "s1", payload.session.order)
    assert accept_stage(ctx, coord, payload) is None
    assert drain_stage(ctx, coord, "t", "s") == Next.NOTHING
    _gone(ctx, coord, payload)
    coord.close()


def test_an_accept_that_raced_the_erasure_removes_what_it_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The erasure ran between the accept's read of its job and its writes."""
    ctx = make_ctx(tmp_path)
    coord = Coordination.sqlite(tmp_path / "c.sqlite")
    payload = _submit(coord, _session("s1"))
    real_put = records.put_session

    def put_then_erased(store: object, record: object) -> None:
        real_put(store, record)  # type: ignore[arg-type]
        _erase(ctx, coord, "s1")

    monkeypatch.setattr(records, "put_session", put_then_erased)
    assert accept_stage(ctx, coord, payload) is None
    monkeypatch.undo()
    _gone(ctx, coord, payload)
    coord.close()


def test_an_erasure_killed_after_its_first_write_never_lets_the_session_commit(
    tmp_path: Path,
) -> None:
    """The cancellation's first write (the job failed as erased, its payload gone) is the
    mark: killed right after it, the session is hidden from reads, and a drain that meets it
    finishes the erasure instead of committing the parked drafts."""
    ctx = make_ctx(tmp_path)
    coord = Coordination.sqlite(tmp_path / "c.sqlite")
    payload = _submit(coord, _session("s1", "My secret is hidden."))
    (chunk,) = accept_stage(ctx, coord, payload) or []
    assert extract_stage(ctx, coord.chunks, chunk)  # every chunk parked: ready to commit
    coord.jobs.cancel_job("t", payload.job_id, ERASED)  # ... and the erasure dies here
    assert pending_sessions(ctx.store, coord.jobs, coord.sequence, "t", "s") == []
    assert drain_stage(ctx, coord, "t", "s") == Next.DRAIN
    assert not any("secret" in f.text for f in ctx.index("t", "s").facts.items())
    _gone(ctx, coord, payload)
    coord.close()


def test_an_accept_killed_after_storing_for_an_erased_job_is_cleaned_on_redelivery(
    tmp_path: Path,
) -> None:
    """The accept stored the record after the erasure, then died before its check: its
    redelivery finds the payload gone and removes the record; the job stays failed."""
    ctx = make_ctx(tmp_path)
    coord = Coordination.sqlite(tmp_path / "c.sqlite")
    payload = _submit(coord, _session("s1"))
    _erase(ctx, coord, "s1")
    record = records.get_session(ctx.store, "t", "s", "s1")
    assert record is None
    from common.memory.ingest import accept

    stored, _, _ = accept(ctx, "t", "s", payload.session, payload.job_id)
    records.put_session(ctx.store, stored)  # what the killed accept left
    coord.jobs.update_job("t", payload.job_id, state="extracting")  # a failed job stays failed
    assert accept_stage(ctx, coord, payload) is None  # the redelivery
    _gone(ctx, coord, payload)
    coord.close()


def test_an_old_accept_leaves_a_resubmission_with_other_content_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Erased and submitted again with other content while the first job's accept ran: the
    old accept removes what it stored, and the new job goes on to commit its own content."""
    ctx = make_ctx(tmp_path)
    coord = Coordination.sqlite(tmp_path / "c.sqlite")
    old = _submit(coord, _session("s1", "My old secret is here."))
    real_put = records.put_session
    fresh: list[AcceptPayload] = []

    def put_then_replaced(store: object, record: object) -> None:
        real_put(store, record)  # type: ignore[arg-type]
        monkeypatch.setattr(records, "put_session", real_put)
        _erase(ctx, coord, "s1")
        fresh.append(_submit(coord, _session("s1", "I adopted a cat.")))

    monkeypatch.setattr(records, "put_session", put_then_replaced)
    assert accept_stage(ctx, coord, old) is None
    (new,) = fresh
    job = coord.jobs.get_job("t", new.job_id)
    assert job is not None and job.state == "queued"  # the new job is untouched
    assert records.get_session(ctx.store, "t", "s", "s1") is None
    (chunk,) = accept_stage(ctx, coord, new) or []
    assert extract_stage(ctx, coord.chunks, chunk)
    assert drain_stage(ctx, coord, "t", "s") == Next.PROFILE
    texts = [f.text for f in ctx.index("t", "s").facts.items()]
    assert texts and not any("secret" in t for t in texts)
    coord.close()


def test_a_session_whose_memory_is_being_written_is_still_refused(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    coord = Coordination.sqlite(tmp_path / "c.sqlite")
    payload = _submit(coord, _session("s1"))
    accept_stage(ctx, coord, payload)
    record = records.get_session(ctx.store, "t", "s", "s1")
    assert record is not None
    records.put_session(ctx.store, record.model_copy(update={"status": "committed"}))
    with pytest.raises(Conflict, match="being committed to memory"):
        _erase(ctx, coord, "s1")
    space = AdminPayload(enqueued_at=0.0, tenant="t", space="s", op="erase_space")
    with pytest.raises(Conflict, match="1 sessions being committed"):
        administer(ctx, coord, space)
    assert coord.sequence.pending("t", "s") == ["s1"]
    assert coord.jobs.job_payload("t", payload.job_id) is not None
    coord.close()


def test_erasing_a_space_cancels_its_sessions_in_flight(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    coord = Coordination.sqlite(tmp_path / "c.sqlite")
    payload = _submit(coord, _session("s1"))
    accept_stage(ctx, coord, payload)
    body = AdminPayload(enqueued_at=0.0, tenant="t", space="s", op="erase_space")
    receipt = administer(ctx, coord, body)
    assert isinstance(receipt, ErasureReceipt) and receipt.erased.sessions_deleted == ["s1"]
    job = coord.jobs.get_job("t", payload.job_id)
    assert job is not None and job.reason == ERASED
    assert coord.sequence.pending("t", "s") == [] and records.get_space(ctx.store, "t", "s") is None
    coord.close()


@pytest.fixture(params=["sqlite", pytest.param("redis", marks=pytest.mark.integration)])
def coordination(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Coordination]:
    if request.param == "sqlite":
        coord = Coordination.sqlite(tmp_path / "c.sqlite")
        yield coord
        coord.close()
        return
    with flushed(REDIS_URL):
        coord = Coordination.redis(REDIS_URL, 3600)
        yield coord
        coord.close()


def test_an_erased_session_can_be_submitted_again_as_a_new_job(
    tmp_path: Path, coordination: Coordination
) -> None:
    ctx = make_ctx(tmp_path)
    first = _submit(coordination, _session("s1"))
    _erase(ctx, coordination, "s1")
    client = Producer(Celery("producer"), coordination.jobs, coordination.sequence)
    with pytest.raises(Conflict, match="erased while being ingested"):
        client.retry("t", first.job_id)  # nothing left to send: the session must come again
    # other content under the same id: not a conflict with the erased one
    again = _submit(coordination, _session("s1", "I moved to Oslo instead."))
    job = coordination.jobs.get_job("t", again.job_id)
    assert job is not None and job.state == "queued" and job.reason is None
    assert again.job_id == first.job_id
    assert again.job_id in {j.job_id for j in coordination.jobs.open_jobs()}
    stored = coordination.jobs.job_payload("t", again.job_id)
    assert stored is not None and "Oslo" in json.loads(stored)["session"]["turns"][0]["text"]
    assert coordination.sequence.pending("t", "s") == ["s1"]
