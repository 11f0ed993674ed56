"""Submitting through the producer: a session id is one job, a conflicting resubmission is
refused and changes nothing, and of concurrent conflicting submissions exactly one wins."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from common.errors import SessionConflict
from common.models.jobs import Job
from common.models.session import SessionInput, Turn
from common.producer import Producer
from common.queues import SHARED_PRIORITY, TaskName
from common.store.coordination.roles import Coordination
from tests.helpers.redis import forget_tenant, redis_or_skip, shared_url

REDIS_URL = shared_url(__name__)  # not flushed: the module's tests use a tenant of their own


class Recorder:
    """Stands in for the Celery app: records what would be sent."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def send_task(self, name: str, kwargs: dict[str, Any], **_: Any) -> None:
        self.sent.append(kwargs["payload"])


def _session(text: str, session_id: str = "s1") -> SessionInput:
    return SessionInput(
        session_id=session_id,
        started_at=datetime(2024, 3, 1, 10),
        participants=["Ann"],
        turns=[Turn(speaker="Ann", text=text)],
    )


@pytest.fixture(params=["sqlite", pytest.param("redis", marks=pytest.mark.integration)])
def coord(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Coordination]:
    if request.param == "sqlite":
        c = Coordination.sqlite(tmp_path / "c.sqlite")
        yield c
        c.close()
        return
    client = redis_or_skip(REDIS_URL, decode_responses=True)
    c = Coordination.redis(REDIS_URL, 3600)
    yield c
    c.close()
    forget_tenant(client, TENANT)
    client.close()


TENANT = f"test-{uuid.uuid4().hex}"


def _client(coord: Coordination) -> tuple[Producer, Recorder]:
    app = Recorder()
    return Producer(app, coord.jobs, coord.sequence), app


def _finish(coord: Coordination, job: Job) -> Job:
    done = coord.jobs.update_job(TENANT, job.job_id, state="done", counts={"facts_in": 2})
    assert done is not None
    coord.sequence.unregister(TENANT, "x", job.session_id)
    return done


def test_a_conflicting_resubmission_is_refused_and_changes_nothing(coord: Coordination) -> None:
    client, app = _client(coord)
    (job,) = client.submit(TENANT, "x", [_session("Ann adopted a cat.")])
    assert len(app.sent) == 1
    payload = coord.jobs.job_payload(TENANT, job.job_id)
    with pytest.raises(SessionConflict, match=rf"as job {job.job_id} \(state queued\)"):
        client.submit(TENANT, "x", [_session("Ann moved.", "s2"), _session("Ann adopted a dog.")])
    assert len(app.sent) == 1  # nothing sent
    assert coord.jobs.job_payload(TENANT, job.job_id) == payload
    assert coord.jobs.get_job(TENANT, job.job_id) == job
    assert coord.sequence.pending(TENANT, "x") == ["s1"]  # s2 of the refused call is undone
    assert [j.job_id for j in coord.jobs.open_jobs() if j.tenant == TENANT] == [job.job_id]

    done = _finish(coord, job)
    with pytest.raises(SessionConflict, match=r"\(state done\)"):
        client.submit(TENANT, "x", [_session("Ann adopted a dog.")])
    after = client.job(TENANT, job.job_id)
    assert after.state == "done" and after.counts == done.counts


def test_an_identical_resubmission_is_the_same_job_unchanged(coord: Coordination) -> None:
    client, app = _client(coord)
    (job,) = client.submit(TENANT, "x", [_session("Ann adopted a cat.")])
    (again,) = client.submit(TENANT, "x", [_session("Ann adopted a cat.")])
    assert again == job and len(app.sent) == 1  # still queued: not sent twice
    done = _finish(coord, job)
    (again,) = client.submit(TENANT, "x", [_session("Ann adopted a cat.")])
    assert again.state == "done" and again.counts == done.counts and again.unchanged
    assert len(app.sent) == 1
    assert client.retry(TENANT, job.job_id).counts == done.counts  # a done job stays done
    assert len(app.sent) == 1


def test_an_identical_resubmission_of_a_failed_job_sends_it_again(coord: Coordination) -> None:
    client, app = _client(coord)
    (job,) = client.submit(TENANT, "x", [_session("Ann adopted a cat.")])
    coord.jobs.update_job(TENANT, job.job_id, state="failed", reason="no space")
    (again,) = client.submit(TENANT, "x", [_session("Ann adopted a cat.")])
    assert again.state == "queued" and again.attempts == 2 and again.reason is None
    assert len(app.sent) == 2


def test_of_concurrent_conflicting_submissions_exactly_one_is_accepted(
    coord: Coordination,
) -> None:
    texts = [f"Ann adopted pet number {i}." for i in range(6)]
    barrier = threading.Barrier(len(texts))
    outcomes: list[str] = [""] * len(texts)
    client, app = _client(coord)

    def submit(i: int) -> None:
        barrier.wait()
        try:
            client.submit(TENANT, "x", [_session(texts[i])])
            outcomes[i] = "accepted"
        except SessionConflict:
            outcomes[i] = "refused"

    threads = [threading.Thread(target=submit, args=(i,)) for i in range(len(texts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["accepted"] + ["refused"] * (len(texts) - 1)
    winner = outcomes.index("accepted")
    assert len(app.sent) == 1 and app.sent[0]["session"]["turns"][0]["text"] == texts[winner]


class Options(Recorder):
    """Records each message's task name and send options."""

    def __init__(self) -> None:
        super().__init__()
        self.options: list[tuple[str, dict[str, Any]]] = []

    def send_task(self, name: str, kwargs: dict[str, Any], **options: Any) -> Any:
        self.options.append((name, options))
        raise LookupError("no broker")  # the question is not waited on here


def test_questions_share_the_fair_lanes_priority_and_reads_go_first(
    tmp_path: Path,
) -> None:
    """Searches and asks take turns with the lanes' tasks (priority 9) instead of going
    ahead of them all, so no question load starves ingestion (common.queues)."""
    coord = Coordination.sqlite(tmp_path / "c.sqlite")
    app = Options()
    client = Producer(app, coord.jobs, coord.sequence)
    for call in (
        lambda: client.search("t", "x", "q?"),
        lambda: client.ask("t", "x", "q?"),
        lambda: client.spaces("t"),
    ):
        with pytest.raises(LookupError):
            call()
    coord.close()
    assert [(n, o.get("priority")) for n, o in app.options] == [
        (TaskName.SEARCH.value, SHARED_PRIORITY),
        (TaskName.ASK.value, SHARED_PRIORITY),
        (TaskName.READ.value, None),
    ]
