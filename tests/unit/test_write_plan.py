"""One write per stage: a commit stage reaches the store as its plan, then one write of every
planned point with the finished session record; plans and parked drafts carry vectors as
packed float32, exactly."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from common.memory import commit
from common.memory.changes import Changes
from common.memory.commit import commit_facts, profile_batch, profile_flush, resume
from common.memory.stages import extract_stage, parked_drafts
from common.models import ids
from common.models.drafts import DraftFact
from common.models.jobs import ExtractPayload
from common.models.memory import Fact, FactSource, FactTime
from common.models.plan import Plan, unpack_vector
from common.models.session import SessionRecord
from common.store import records
from common.store.base import Kind, Point, Store
from common.store.coordination.roles import Coordination
from tests.helpers.contexts import make_ctx
from tests.helpers.doubles import unit
from tests.helpers.records import draft, session_record


@dataclass
class Call:
    """One store call: how many points of each kind it wrote, and the session statuses."""

    kinds: Counter[Kind]
    ids: list[tuple[Kind, str]]
    statuses: list[str]


@dataclass
class CountingStore:
    """The store, with every write and delete call recorded."""

    inner: Store
    calls: list[Call] = field(default_factory=list)

    def _record(self, points: Sequence[tuple[Kind, Point]]) -> None:
        self.calls.append(
            Call(
                kinds=Counter(kind for kind, _ in points),
                ids=[(kind, p.id) for kind, p in points],
                statuses=[p.payload["status"] for kind, p in points if kind == Kind.SESSIONS],
            )
        )

    def write(self, points: Sequence[tuple[Kind, Point]]) -> None:
        self._record(points)
        self.inner.write(points)

    def upsert(self, kind: Kind, points: Sequence[Point]) -> None:
        self._record([(kind, p) for p in points])
        self.inner.upsert(kind, points)

    def delete(self, kind: Kind, tenant: str, space: str, ids: Sequence[str]) -> None:
        self.calls.append(Call(kinds=Counter(), ids=[], statuses=[]))
        self.inner.delete(kind, tenant, space, ids)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


TEXTS = [
    ("Ann paints landscapes.", (1, 0, 0, 0)),
    ("Ann bought paint brushes.", (0.7, 0.7, 0, 0)),
    ("Ann runs marathons.", (0, 0, 1, 0)),
]


def _drafts(rec: SessionRecord, profile: bool = False) -> list[DraftFact]:
    return [
        draft(rec, t, unit(*v), [t.split()[1].lower()], ["Ann"], index=i, profile=profile)
        for i, (t, v) in enumerate(TEXTS)
    ]


def _counting(ctx: Any) -> CountingStore:
    counting = CountingStore(ctx.store)
    ctx.store = counting
    return counting


def _session_key(rec: SessionRecord) -> tuple[Kind, str]:
    return Kind.SESSIONS, ids.session_point_id("t", "s", rec.session.session_id)


def _planned(plan: Plan | None) -> list[tuple[Kind, str]]:
    assert plan is not None
    return [(Kind(p.kind), p.id) for p in plan.points]


def _assert_two_writes(calls: list[Call], rec: SessionRecord, running: str, done: str) -> None:
    """Write 1: the session record with its plan; write 2: every planned point, then the
    session record marked done, in one call."""
    assert len(calls) == 2
    first, second = calls
    assert first.kinds == Counter({Kind.SESSIONS: 1}) and first.statuses == [running]
    assert second.statuses == [done]
    assert second.ids[-1] == _session_key(rec)  # the done record comes last
    assert sum(c.kinds[Kind.SESSIONS] for c in calls) == 2


def test_a_commit_stage_is_two_store_calls_its_points_in_one(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    ctx.backend.links["Ann bought paint brushes."] = ["Ann paints landscapes."]  # type: ignore[attr-defined]
    rec = session_record("s1", 0, datetime(2024, 3, 1), ["Ann"])
    ctx.index("t", "s")
    plans: list[Plan | None] = []
    real_put = records.put_session

    def put_session(store: Store, record: SessionRecord) -> None:
        plans.append(record.plan)
        real_put(store, record)

    counting = _counting(ctx)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(records, "put_session", put_session)
        commit_facts(ctx, rec, _drafts(rec))
    _assert_two_writes(counting.calls, rec, "committing", "committed")
    (plan,) = plans
    planned = _planned(plan)
    assert counting.calls[1].ids == [*planned, _session_key(rec)]
    assert counting.calls[1].kinds == Counter({Kind.FACTS: 3, Kind.EVENTS: 1, Kind.SESSIONS: 1})
    stored = records.get_session(ctx.store, "t", "s", "s1")
    assert stored is not None and stored.status == "committed" and stored.plan is None


def test_a_profile_stage_is_two_store_calls_its_points_in_one(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    rec = session_record("s1", 0, datetime(2024, 3, 1), ["Ann"])
    commit_facts(ctx, rec, _drafts(rec, profile=True))
    counting = _counting(ctx)
    stats = profile_batch(ctx, rec)
    _assert_two_writes(counting.calls, rec, "profiling", "done")
    assert stats.profile_changes > 0 and counting.calls[1].kinds[Kind.PROFILES] > 0


def test_a_resumed_stage_is_one_store_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = make_ctx(tmp_path)
    rec = session_record("s1", 0, datetime(2024, 3, 1), ["Ann"])

    def crash(*_: object) -> None:
        raise RuntimeError("killed after recording the plan")

    with monkeypatch.context() as patch:
        patch.setattr(commit, "apply_plan", crash)
        with pytest.raises(RuntimeError):
            commit_facts(ctx, rec, _drafts(rec))
    stored = records.get_session(ctx.store, "t", "s", "s1")
    assert stored is not None and stored.plan is not None
    counting = _counting(ctx)
    done = resume(ctx, stored)
    assert done.status == "committed" and done.plan is None
    (call,) = counting.calls
    assert call.ids == [*_planned(stored.plan), _session_key(rec)]
    assert call.statuses == ["committed"]


def test_an_on_demand_profile_flush_is_one_store_call(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    rec = session_record("s1", 0, datetime(2024, 3, 1), ["Ann"])
    commit_facts(ctx, rec, _drafts(rec, profile=True))
    counting = _counting(ctx)
    stats = profile_flush(ctx, "t", "s")
    assert stats.profile_changes > 0
    (call,) = counting.calls
    # Profiles first: a backend that writes kind by kind stores them before the flags clear.
    assert call.ids[0][0] == Kind.PROFILES and call.kinds[Kind.FACTS] == 3


N, DIM = 20, 384


def _fact(i: int) -> Fact:
    when = datetime(2024, 3, 1)
    return Fact(
        id=f"f{i}",
        tenant="t",
        space="s",
        text=f"fact {i}",
        participants=["Ann"],
        keywords=["k"],
        time=FactTime(session=when),
        source=FactSource(session_id="s1", session_seq=0, turn_ids=["s1:0"], positions=[0]),
    )


def _float_lists(value: object) -> int:
    if isinstance(value, list):
        here = 1 if value and all(isinstance(v, float) for v in value) else 0
        return here + sum(_float_lists(v) for v in value)
    if isinstance(value, dict):
        return sum(_float_lists(v) for v in value.values())
    return 0


def _bits(vector: np.ndarray) -> np.ndarray:
    return np.asarray(vector, dtype=np.float32).view(np.uint32)


def test_a_recorded_plan_packs_its_vectors_as_float32_exactly() -> None:
    rng = np.random.default_rng(16)
    vectors = rng.standard_normal((N, DIM)).astype(np.float32)
    vectors[0, :3] = [np.float32(1e-45), np.float32(-0.0), np.finfo(np.float32).max]
    changes = Changes()
    for i, vector in enumerate(vectors):
        changes.fact(_fact(i), vector)
    rec = session_record("s1", 0, datetime(2024, 3, 1), ["Ann"])
    planned = rec.model_copy(update={"status": "committing", "plan": changes.plan()})

    stored = json.dumps(planned.model_dump(mode="json"))  # the session record as a payload
    assert _float_lists(json.loads(stored)) == 0
    plan_size = len(json.dumps(planned.plan.model_dump(mode="json")))  # type: ignore[union-attr]
    # 384 float32 are 1536 bytes, 2048 in base64; a JSON list of them is about 8 KB.
    assert N * 2048 < plan_size < N * 3 * 1024

    back = SessionRecord.model_validate(json.loads(stored))
    assert back.plan is not None and len(back.plan.points) == N
    for point, vector in zip(back.plan.points, vectors, strict=True):
        assert point.vector is not None
        assert np.array_equal(_bits(unpack_vector(point.vector)), _bits(vector))


def test_parked_drafts_keep_their_vectors_bit_exact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx = make_ctx(tmp_path)
    rec = session_record("s1", 0, datetime(2024, 3, 1), ["Ann"])
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((N, DIM)).astype(np.float32)
    made = [
        draft(rec, f"Ann did thing {i}.", v, ["k"], ["Ann"], index=i) for i, v in enumerate(vectors)
    ]
    monkeypatch.setattr("common.memory.stages.draft_session", lambda *_: made)
    coord = Coordination.sqlite(tmp_path / "c.sqlite")
    payload = ExtractPayload(
        enqueued_at=0.0, job_id="j1", tenant="t", space="s", session=rec.session,
        context_turns=0, chunk=0, chunks=1,
    )  # fmt: skip
    assert extract_stage(ctx, coord.chunks, payload)

    (raw,) = coord.chunks.get_chunks("t", "s", "s1").values()
    assert _float_lists(json.loads(raw)) == 0
    assert len(raw) < N * 3 * 1024
    parked = parked_drafts(coord.chunks, "t", "s", "s1")
    assert parked is not None
    drafts, _ = parked
    assert [d.id for d in drafts] == [d.id for d in made]
    for got, vector in zip(drafts, vectors, strict=True):
        assert np.array_equal(_bits(unpack_vector(got.vector)), _bits(vector))
