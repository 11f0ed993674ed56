"""Erasure on hand-built spaces (fake vectors, real store): what is deleted, what is rewritten,
and that nothing of the erased content survives in any collection."""

from __future__ import annotations

import json
from datetime import date, datetime
from pathlib import Path
from typing import Any

import pytest

from common.context import MemoryContext
from common.llm.contracts import FactUpdate, VerifyDecision
from common.memory import commit, erase
from common.memory.admin import administer
from common.memory.changes import CommitStats, apply_plan
from common.memory.commit import commit_facts, profile_batch
from common.memory.erase import erase_facts, erase_session, erase_space
from common.models import ids
from common.models.jobs import AdminPayload
from common.models.memory import Profile, ProfileVersion
from common.models.plan import Plan
from common.models.responses import Erased
from common.models.session import SessionRecord
from common.retrieval.search import ask, ask_response
from common.store import records
from common.store.base import Kind, Point
from common.store.coordination.roles import Coordination
from tests.helpers.contexts import make_ctx
from tests.helpers.doubles import ScriptedBackend, unit
from tests.helpers.records import draft, session_record

WHEN = datetime(2024, 3, 1, 12, 0)


def _commit(
    ctx: MemoryContext, rec: SessionRecord, texts: list[tuple[str, tuple[float, ...]]]
) -> CommitStats:
    records.put_session(ctx.store, rec)
    drafts = [
        draft(rec, t, unit(*v), [t.split()[1].lower()], ["Ann"], index=i)
        for i, (t, v) in enumerate(texts)
    ]
    return commit_facts(ctx, rec, drafts)


def _everything(ctx: MemoryContext) -> str:
    """Every payload of the space, as one text to search."""
    dump = []
    for kind in (Kind.FACTS, Kind.EVENTS, Kind.PROFILES, Kind.SESSIONS, Kind.SPACES):
        dump += [p.payload for p in ctx.store.scroll(kind, "t", "s")]
    return json.dumps(dump)


def _space_with_an_event(tmp_path: Path) -> MemoryContext:
    ctx = make_ctx(tmp_path)
    assert isinstance(ctx.backend, ScriptedBackend)
    ctx.backend.links["Ann bought paint brushes."] = ["Ann paints landscapes."]
    ctx.backend.links["Ann framed a painting."] = ["Ann paints landscapes."]
    rec = session_record("s0", 0, WHEN, ["Ann"])
    _commit(
        ctx,
        rec,
        [
            ("Ann paints landscapes.", (1, 0, 0, 0)),
            ("Ann bought paint brushes.", (0.7, 0.7, 0, 0)),
            ("Ann framed a painting.", (0.7, 0, 0.7, 0)),
        ],
    )
    return ctx


def test_erasing_a_fact_rewrites_its_event_without_it(tmp_path: Path) -> None:
    ctx = _space_with_an_event(tmp_path)
    index = ctx.index("t", "s")
    (event,) = index.events.items()
    assert "brushes" in event.summary
    brushes = next(f for f in index.facts.items() if "brushes" in f.text)
    report = Erased()
    erase_facts(ctx, "t", "s", {brushes.id}, report)
    assert report.facts_deleted == [brushes.id]
    assert report.events_rewritten == [event.id] and report.events_deleted == []
    assert "brushes" not in _everything(ctx)
    (after,) = ctx.index("t", "s").events.items()
    assert brushes.id not in after.fact_ids and len(after.fact_ids) == 2
    assert ctx.store.count(Kind.FACTS, "t", "s") == 2


def test_an_event_left_empty_is_deleted_and_its_facts_forget_it(tmp_path: Path) -> None:
    ctx = _space_with_an_event(tmp_path)
    index = ctx.index("t", "s")
    (event,) = index.events.items()
    report = Erased()
    erase_facts(ctx, "t", "s", set(event.fact_ids), report)
    assert report.events_deleted == [event.id]
    assert ctx.store.count(Kind.EVENTS, "t", "s") == 0
    assert ctx.store.count(Kind.FACTS, "t", "s") == 0
    assert "paint" not in _everything(ctx)


def test_erasing_a_session_undoes_its_update_and_provenance(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    rec0 = session_record("s0", 0, WHEN, ["Ann"])
    _commit(ctx, rec0, [("Ann lives in Boston.", (1, 0, 0, 0))])
    old = next(iter(ctx.index("t", "s").facts.items()))
    ctx.backend.verdicts["Ann lives in Denver."] = VerifyDecision(  # type: ignore[attr-defined]
        store=False, updates=[FactUpdate(fact_id=old.id, text="Ann lives in Denver.")]
    )
    rec1 = session_record("s1", 1, datetime(2024, 6, 1), ["Ann"])
    _commit(
        ctx,
        rec1,
        [("Ann lives in Denver.", (0.8, 0.6, 0, 0)), ("Ann adopted a dog.", (0, 0, 1, 0))],
    )
    assert "Denver" in _everything(ctx)
    report = Erased()
    erase_session(ctx, "t", "s", "s1", report)
    facts = {f.text: f for f in ctx.index("t", "s").facts.items()}
    assert set(facts) == {"Ann lives in Boston."}
    kept = facts["Ann lives in Boston."]
    assert kept.history == [] and kept.also_from == [] and kept.id == old.id
    assert report.facts_rewritten == [old.id] and len(report.facts_deleted) == 1
    assert report.sessions_deleted == ["s1"]
    text = _everything(ctx)
    assert "Denver" not in text and "dog" not in text and '"s1"' not in text
    assert records.get_session(ctx.store, "t", "s", "s0") is not None


def test_a_profile_falls_back_to_the_version_its_remaining_evidence_supports(
    tmp_path: Path,
) -> None:
    ctx = make_ctx(tmp_path)
    rec = session_record("s0", 0, WHEN, ["Ann"])
    _commit(
        ctx, rec, [("Ann lives in Boston.", (1, 0, 0, 0)), ("Ann lives in Denver.", (0, 1, 0, 0))]
    )
    by_text = {f.text: f.id for f in ctx.index("t", "s").facts.items()}
    profile = Profile(
        id=ids.profile_id("t", "s", "Ann", "home"),
        tenant="t",
        space="s",
        person="Ann",
        content="Ann lives in Denver.",
        keywords=["lives"],
        evidence_fact_ids=[by_text["Ann lives in Denver."]],
        t_from=date(2024, 6, 1),
        history=[
            ProfileVersion(
                content="Ann lives in Boston.",
                keywords=["lives"],
                evidence_fact_ids=[by_text["Ann lives in Boston."]],
                t_from=date(2024, 1, 1),
                t_to=date(2024, 6, 1),
            )
        ],
    )
    ctx.store.upsert(
        Kind.PROFILES,
        [Point(id=profile.id, payload=profile.model_dump(mode="json"), vector=unit(0, 1, 0, 0))],
    )
    ctx.indexes.drop("t", "s")
    report = Erased()
    erase_facts(ctx, "t", "s", {by_text["Ann lives in Denver."]}, report)
    (after,) = ctx.index("t", "s").profiles.items()
    assert after.content == "Ann lives in Boston." and after.history == []
    assert report.profiles_rewritten == [profile.id]
    erase_facts(ctx, "t", "s", {by_text["Ann lives in Boston."]}, Erased())
    assert ctx.store.count(Kind.PROFILES, "t", "s") == 0
    assert "lives" not in _everything(ctx)


def test_erasing_a_space_leaves_no_point_and_spares_other_spaces(tmp_path: Path) -> None:
    ctx = _space_with_an_event(tmp_path)
    records.create_space(ctx.store, "t", "other")
    report = Erased()
    erase_space(ctx, "t", "s", report)
    assert len(report.facts_deleted) == 3 and len(report.events_deleted) == 1
    assert report.sessions_deleted == ["s0"]
    for kind in (Kind.FACTS, Kind.EVENTS, Kind.PROFILES, Kind.SESSIONS, Kind.SPACES):
        assert ctx.store.count(kind, "t", "s") == 0
    assert records.get_space(ctx.store, "t", "other") is not None


def _commit_profiled(
    ctx: MemoryContext, rec: SessionRecord, texts: list[tuple[str, tuple[float, ...]]]
) -> None:
    """Commit profile-worthy facts, then run the session's profile batch."""
    records.put_session(ctx.store, rec)
    drafts = [
        draft(rec, t, unit(*v), [t.split()[1].lower()], ["Ann"], index=i, profile=True)
        for i, (t, v) in enumerate(texts)
    ]
    commit_facts(ctx, rec, drafts)
    profile_batch(ctx, rec)


def _updated_by_a_later_session(tmp_path: Path) -> tuple[MemoryContext, str]:
    """s0 says Ann lives in Boston (a profile cites it); s1 links a fact of its own to it in
    an event; s2 updates the Boston fact to Denver. Returns the context and the fact's id."""
    ctx = make_ctx(tmp_path)
    ctx.settings.memory.event_max_span_days = 365  # its sessions are months apart
    assert isinstance(ctx.backend, ScriptedBackend)
    _commit_profiled(ctx, session_record("s0", 0, WHEN, ["Ann"]), [HOME])
    home = next(iter(ctx.index("t", "s").facts.items()))
    ctx.backend.links["Ann bought a house with a garden."] = [HOME[0]]
    _commit_profiled(
        ctx,
        session_record("s1", 1, datetime(2024, 4, 1), ["Ann"]),
        [("Ann bought a house with a garden.", (0.3, 0, 0.954, 0))],
    )
    ctx.backend.verdicts["Ann lives in Denver."] = VerifyDecision(
        store=False, updates=[FactUpdate(fact_id=home.id, text="Ann lives in Denver.")]
    )
    _commit_profiled(
        ctx,
        session_record("s2", 2, datetime(2024, 6, 1), ["Ann"]),
        [("Ann lives in Denver.", (0.9, 0.436, 0, 0))],
    )
    return ctx, home.id


HOME = ("Ann lives in Boston.", (1.0, 0.0, 0.0, 0.0))


def test_erasing_a_session_a_later_one_updated_leaves_its_text_nowhere(tmp_path: Path) -> None:
    ctx, home = _updated_by_a_later_session(tmp_path)
    index = ctx.index("t", "s")
    (event,) = index.events.items()
    (profile,) = index.profiles.items()
    assert "Boston" in event.summary and "Boston" in profile.content
    assert index.facts.get(home).text == "Ann lives in Denver."
    report = Erased()
    erase_session(ctx, "t", "s", "s0", report)
    assert "Boston" not in _everything(ctx)
    after = ctx.index("t", "s")
    fact = after.facts.get(home)
    assert fact.text == "Ann lives in Denver." and fact.history == []
    assert fact.source.session_id == "s2"
    assert report.facts_rewritten == [home]
    assert report.events_rewritten == [event.id]
    assert sorted(report.profiles_rewritten + report.profiles_deleted) == [profile.id]
    answer = ask_response(ask(ctx, "t", "s", "Where does Ann live?")).model_dump_json()
    assert "Boston" not in answer


def test_erasing_the_updating_session_rebuilds_what_cites_the_fact(tmp_path: Path) -> None:
    ctx, home = _updated_by_a_later_session(tmp_path)
    ctx.backend.links["Ann planted tulips in the garden."] = ["Ann bought a house with a garden."]  # type: ignore[attr-defined]
    # A later session's fact joins the event: its summary now carries Denver.
    _commit_profiled(
        ctx,
        session_record("s3", 3, datetime(2024, 7, 1), ["Ann"]),
        [("Ann planted tulips in the garden.", (0, 0, 0.6, 0.8))],
    )
    (event,) = ctx.index("t", "s").events.items()
    assert "Denver" in event.summary
    report = Erased()
    erase_session(ctx, "t", "s", "s2", report)
    assert "Denver" not in _everything(ctx)
    assert ctx.index("t", "s").facts.get(home).text == "Ann lives in Boston."
    assert event.id in report.events_rewritten


def test_erasing_a_fact_rebuilds_a_profile_version_it_shared_with_other_evidence(
    tmp_path: Path,
) -> None:
    ctx = make_ctx(tmp_path)
    rec = session_record("s0", 0, WHEN, ["Ann"])
    _commit(
        ctx,
        rec,
        [("Ann lives in Boston.", (1, 0, 0, 0)), ("Ann loves her sunny city.", (0, 1, 0, 0))],
    )
    by_text = {f.text: f.id for f in ctx.index("t", "s").facts.items()}
    profile = Profile(
        id=ids.profile_id("t", "s", "Ann", "home"),
        tenant="t",
        space="s",
        person="Ann",
        content="Ann lives in Boston.",
        keywords=["lives"],
        evidence_fact_ids=[by_text["Ann lives in Boston."], by_text["Ann loves her sunny city."]],
        t_from=date(2024, 1, 1),
    )
    ctx.store.upsert(
        Kind.PROFILES,
        [Point(id=profile.id, payload=profile.model_dump(mode="json"), vector=unit(1, 0, 0, 0))],
    )
    ctx.indexes.drop("t", "s")
    report = Erased()
    erase_facts(ctx, "t", "s", {by_text["Ann lives in Boston."]}, report)
    assert "Boston" not in _everything(ctx)
    (after,) = ctx.index("t", "s").profiles.items()
    assert after.content == "Ann loves her sunny city."
    assert after.evidence_fact_ids == [by_text["Ann loves her sunny city."]]
    assert report.profiles_rewritten == [profile.id]


def test_an_erasure_interrupted_before_its_rewrites_finishes_when_run_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx, home = _updated_by_a_later_session(tmp_path)

    def crash(*_: object) -> None:
        raise ConnectionError("the store went away")

    monkeypatch.setattr(erase, "apply_plan", crash)
    with pytest.raises(ConnectionError):
        erase_session(ctx, "t", "s", "s0", Erased())
    monkeypatch.undo()
    erase_session(ctx, "t", "s", "s0", Erased())
    assert "Boston" not in _everything(ctx)
    assert ctx.index("t", "s").facts.get(home).text == "Ann lives in Denver."
    ctx.indexes.drop("t", "s")
    assert "Boston" not in json.dumps(
        [f.model_dump(mode="json") for f in ctx.index("t", "s").facts.items()]
    )


@pytest.mark.parametrize("crash_on", [Kind.FACTS, Kind.EVENTS, Kind.PROFILES])
def test_an_erasure_that_crashed_mid_write_finishes_on_rerun(
    tmp_path: Path, crash_on: Kind
) -> None:
    """Whichever kind's write fails, running the erasure again leaves no erased wording."""
    ctx, _ = _updated_by_a_later_session(tmp_path)
    real = ctx.store.upsert
    armed = [True]

    def upsert(kind: Kind, points: Any) -> None:
        if kind == crash_on and armed[0]:
            armed[0] = False
            raise ConnectionError("the store went away")
        real(kind, points)

    ctx.store.upsert = upsert  # type: ignore[method-assign]
    with pytest.raises(ConnectionError):
        erase_session(ctx, "t", "s", "s0", Erased())
    erase_session(ctx, "t", "s", "s0", Erased())
    assert "Boston" not in _everything(ctx)


def test_an_interrupted_stage_is_finished_before_an_erasure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session whose commit stopped after recording its plan: the erasure finishes that
    stage first, so the plan cannot write an erased fact back later."""
    ctx = make_ctx(tmp_path)
    record = session_record("s0", 0, datetime(2024, 3, 1), ["Ann"])
    records.put_session(ctx.store, record)
    drafts = [draft(record, "Ann lives in Boston.", unit(1, 0, 0, 0), ["lives"], ["Ann"])]

    def crash(*_: Any) -> None:
        raise ConnectionError("the store went away")

    with monkeypatch.context() as patch:
        patch.setattr(commit, "apply_plan", crash)
        with pytest.raises(ConnectionError):
            commit_facts(ctx, record, drafts)
    stored = records.get_session(ctx.store, "t", "s", "s0")
    assert stored is not None and stored.plan is not None
    # Half applied: the fact reached the store, its session record still holds the plan.
    apply_plan(ctx.store, Plan(points=[p for p in stored.plan.points if p.kind == "facts"]))
    ctx.indexes.drop("t", "s")
    (fact,) = ctx.index("t", "s").facts.items()

    coord = Coordination.sqlite(tmp_path / "coordination.sqlite")
    payload = AdminPayload(enqueued_at=0.0, tenant="t", space="s", op="erase_fact", item_id=fact.id)
    administer(ctx, coord, payload)
    coord.close()
    stored = records.get_session(ctx.store, "t", "s", "s0")
    assert stored is not None and stored.plan is None
    ctx.indexes.drop("t", "s")
    assert fact.id not in ctx.index("t", "s").facts
    assert "Boston" not in _everything(ctx)
