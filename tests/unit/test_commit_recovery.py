"""A commit interrupted after recording its plan is finished by re-applying the plan."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from common.context import MemoryContext
from common.memory import changes
from common.memory import commit as commit_module
from common.memory.commit import commit_facts, resume
from common.models.drafts import DraftFact
from common.models.memory import Fact
from common.models.plan import Plan
from common.models.session import SessionRecord
from common.store import records
from common.store.base import Kind, Point, Store
from tests.helpers.contexts import make_ctx
from tests.helpers.doubles import unit
from tests.helpers.records import draft, session_record

TEXTS = [
    ("Ann paints landscapes.", (1, 0, 0, 0)),
    ("Ann bought paint brushes.", (0.7, 0.7, 0, 0)),
    ("Ann runs marathons.", (0, 0, 1, 0)),
]


def _drafts(rec: SessionRecord) -> list[DraftFact]:
    return [
        draft(rec, t, unit(*v), [t.split()[1].lower()], ["Ann"], index=i)
        for i, (t, v) in enumerate(TEXTS)
    ]


def _counts(store: Store) -> tuple[int, int]:
    return store.count(Kind.FACTS, "t", "s"), store.count(Kind.EVENTS, "t", "s")


def test_crash_after_the_plan_is_recorded_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clean = make_ctx(tmp_path / "clean")
    clean.backend.links["Ann bought paint brushes."] = ["Ann paints landscapes."]  # type: ignore[attr-defined]
    rec = session_record("s1", 0, datetime(2024, 3, 1), ["Ann"])
    commit_facts(clean, rec, _drafts(rec))
    expected = _counts(clean.store)
    assert expected == (3, 1)

    ctx = make_ctx(tmp_path / "crash")
    ctx.backend.links["Ann bought paint brushes."] = ["Ann paints landscapes."]  # type: ignore[attr-defined]
    real_apply = changes.apply_plan  # what commit calls, by its own name

    def apply_half_then_die(store: Store, plan: Plan, *_done: tuple[Kind, Point]) -> None:
        # A backend that writes kind by kind can stop after any of them: the first fact
        # lands, the rest of the plan and the done session record do not.
        real_apply(store, Plan(points=plan.points[:1]))
        raise KeyboardInterrupt("killed mid-write")

    monkeypatch.setattr(commit_module, "apply_plan", apply_half_then_die)
    rec = session_record("s1", 0, datetime(2024, 3, 1), ["Ann"])
    with pytest.raises(KeyboardInterrupt):
        commit_facts(ctx, rec, _drafts(rec))
    monkeypatch.setattr(commit_module, "apply_plan", real_apply)

    stored = records.get_session(ctx.store, "t", "s", "s1")
    assert stored is not None and stored.status == "committing" and stored.plan is not None
    assert _counts(ctx.store) != expected

    done = resume(ctx, stored)
    assert done.status == "committed" and done.plan is None
    assert _counts(ctx.store) == expected

    def by_id(c: MemoryContext) -> list[Fact]:
        return sorted(c.index("t", "s").facts.items(), key=lambda f: f.id)

    assert by_id(ctx) == by_id(clean)
