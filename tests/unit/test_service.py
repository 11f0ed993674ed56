"""The memory service every front door serves: replies typed where they arrive, the space
checked before a session is queued, the write quota counted once with its refund."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any, get_args

import pytest
from pydantic import ValidationError

from common.errors import KINDS, Conflict, InvalidInput, NotFound, UnknownSpace, failure
from common.models.jobs import AdminOp, ReadWhat
from common.models.query import QueryIntent, SearchResponse
from common.models.replies import REPLIES
from common.models.responses import Page, Space
from common.producer import Producer
from common.queues import TaskName
from common.service import OverQuota, TenantMemory
from common.settings import ApiSettings
from common.store.coordination.roles import Coordination

Answer = Callable[[str, dict[str, Any]], Any]
SPACE = {
    "name": "alice",
    "created_at": "2024-03-01T10:00:00+00:00",
    "participants": ["Ann"],
    "counts": {"sessions": 0, "facts": 0, "events": 0, "profiles": 0},
}
SESSION: dict[str, Any] = {
    "session_id": "s1",
    "started_at": "2024-03-01T10:00:00Z",
    "participants": ["Ann"],
    "turns": [{"speaker": "Ann", "text": "I adopted a cat."}],
}


class Pending:
    def __init__(self, reply: Any) -> None:
        self.reply = reply
        self.forgotten = False

    def get(self, timeout: float, interval: float) -> Any:
        return self.reply

    def forget(self) -> None:
        self.forgotten = True


class Workers:
    """Stands in for the Celery app: each task is answered by `answer`, and recorded."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.sent: list[tuple[str, dict[str, Any]]] = []

    def send_task(self, name: str, kwargs: dict[str, Any], **_: Any) -> Pending:
        self.sent.append((name, kwargs["payload"]))
        return Pending(self.answer(name, kwargs["payload"]))


class Quota:
    def __init__(self, allowed: bool = True) -> None:
        self.allowed = allowed
        self.counted = 0
        self.refunded = 0

    def allow_write(self, tenant: str, per_minute: int) -> tuple[str, float | None]:
        if not self.allowed:
            return "counter", 12.2
        self.counted += 1
        return "counter", None

    def refund_write(self, counter: str) -> None:
        self.refunded += 1


def _producer(tmp_path: Path, answer: Answer) -> tuple[Producer, Workers]:
    coord = Coordination.sqlite(tmp_path / "c.sqlite")
    workers = Workers(answer)
    return Producer(workers, coord.jobs, coord.sequence), workers


def _spaces(known: set[str]) -> Answer:
    def answer(name: str, payload: dict[str, Any]) -> Any:
        if name == TaskName.ACCEPT.value:
            return None  # sent, not waited for
        assert name == TaskName.READ.value and payload["what"] == "space"
        if payload["space"] not in known:
            return failure(UnknownSpace(payload["tenant"], payload["space"]))
        return SPACE | {"name": payload["space"]}

    return answer


def test_every_read_and_admin_operation_has_its_reply_model() -> None:
    assert {what for name, what in REPLIES if name is TaskName.READ} == set(get_args(ReadWhat))
    assert {op for name, op in REPLIES if name is TaskName.ADMIN} == set(get_args(AdminOp))
    assert REPLIES[TaskName.READ, "facts"] is not REPLIES[TaskName.READ, "events"]


def test_a_reply_arrives_as_its_model(tmp_path: Path) -> None:
    empty = {"total": 0, "offset": 0, "items": []}
    producer, workers = _producer(tmp_path, lambda n, p: SPACE if p["what"] == "space" else empty)
    space = producer.space("t", "alice")
    assert isinstance(space, Space) and space.counts.sessions == 0
    assert space.model_dump(mode="json")["created_at"] == SPACE["created_at"]  # as it came
    page = producer.page("t", "alice", "facts", limit=7, offset=2)
    assert isinstance(page, Page) and page.total == 0
    assert [(p["what"], p["limit"], p["offset"]) for _, p in workers.sent][1] == ("facts", 7, 2)


def test_a_reply_that_is_not_its_model_is_refused(tmp_path: Path) -> None:
    producer, _ = _producer(tmp_path, lambda name, p: {"items": []})
    with pytest.raises(ValidationError):
        producer.search("t", "alice", "Where does Ann live?")
    with pytest.raises(ValidationError):
        producer.space("t", "alice")


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_failure_comes_back_as_its_kind(tmp_path: Path, kind: str) -> None:
    producer, _ = _producer(tmp_path, lambda name, p: {"error": "no such thing", "kind": kind})
    with pytest.raises(KINDS[kind], match="no such thing"):
        producer.search("t", "alice", "Where does Ann live?")


def test_a_session_for_an_unknown_space_is_not_queued_and_costs_no_write(
    tmp_path: Path,
) -> None:
    producer, workers = _producer(tmp_path, _spaces({"alice"}))
    quota = Quota()
    memory = TenantMemory(producer, "t", ApiSettings(), quota)
    with pytest.raises(NotFound, match="'bob' does not exist"):
        memory.add("bob", SESSION)
    assert [name for name, _ in workers.sent] == [TaskName.READ.value]
    assert (quota.counted, quota.refunded) == (1, 1)
    job = memory.add("alice", SESSION)
    assert job.space == "alice" and job.state == "queued"
    assert [name for name, _ in workers.sent][-1] == TaskName.ACCEPT.value
    assert (quota.counted, quota.refunded) == (2, 1)


def test_a_session_over_the_limits_or_with_an_unknown_speaker_is_invalid(
    tmp_path: Path,
) -> None:
    producer, workers = _producer(tmp_path, _spaces({"alice"}))
    memory = TenantMemory(producer, "t", ApiSettings(max_turns=1), Quota())
    with pytest.raises(InvalidInput, match="2 turns: at most 1"):
        memory.add("alice", SESSION | {"turns": SESSION["turns"] * 2})
    stranger = [{"speaker": "Mallory", "text": "Hello."}]
    with pytest.raises(InvalidInput, match="session: .*unknown speaker 'Mallory'"):
        memory.add("alice", SESSION | {"turns": stranger})
    assert workers.sent == []


def test_over_the_quota_nothing_is_sent(tmp_path: Path) -> None:
    producer, workers = _producer(tmp_path, _spaces({"alice"}))
    memory = TenantMemory(producer, "t", ApiSettings(writes_per_minute=5), Quota(allowed=False))
    with pytest.raises(OverQuota, match="over 5 writes per minute") as refused:
        memory.create_space("carol")
    assert refused.value.retry_after == 13
    with pytest.raises(OverQuota):
        memory.delete("alice", fact_id="f1")
    assert workers.sent == []


def test_a_refused_erasure_gives_its_write_back(tmp_path: Path) -> None:
    conflict = failure(Conflict("session 's1' is being committed to memory"))
    producer, workers = _producer(tmp_path, lambda name, p: conflict)
    quota = Quota()
    memory = TenantMemory(producer, "t", ApiSettings(), quota)
    with pytest.raises(Conflict):
        memory.delete("alice", session_id="s1")
    ((name, payload),) = workers.sent
    assert name == TaskName.ADMIN.value and payload["op"] == "erase_session"
    assert (quota.counted, quota.refunded) == (1, 1)
    with pytest.raises(InvalidInput, match="erase one thing"):
        memory.delete("alice", fact_id="f1", session_id="s1")


def test_a_search_goes_out_with_the_services_timeout(tmp_path: Path) -> None:
    empty = SearchResponse(
        question="q", intent=QueryIntent(), hits=[], profiles=[], events=[], timings_ms={}
    )
    reply = empty.model_dump(mode="json")
    producer, workers = _producer(tmp_path, lambda name, p: reply)
    memory = TenantMemory(producer, "t", ApiSettings(query_timeout_s=7.0))
    before = datetime.now().timestamp()
    found = memory.search("alice", "q", k=3, mode="flat")
    ((name, payload),) = workers.sent
    assert isinstance(found, SearchResponse) and name == TaskName.SEARCH.value
    assert (payload["k"], payload["mode"]) == (3, "flat")
    assert before + 7.0 <= payload["reply_by"] <= datetime.now().timestamp() + 7.0
