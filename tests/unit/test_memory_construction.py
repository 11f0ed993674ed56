"""Verification and every branch of Algorithm 1 on hand-built spaces (fake vectors, real store)."""

from __future__ import annotations

from datetime import date, datetime
from pathlib import Path

import numpy as np

from common.context import MemoryContext
from common.llm.contracts import EventSummary, FactUpdate, FactView, VerifyDecision
from common.memory.changes import CommitStats
from common.memory.commit import commit_facts
from common.models.memory import Event, Fact, TimeRange
from common.store.base import Kind
from tests.helpers.contexts import make_ctx
from tests.helpers.doubles import ScriptedBackend, TableEncoder, unit
from tests.helpers.records import draft, session_record

WHEN = datetime(2024, 3, 1, 12, 0)


def _facts(ctx: MemoryContext) -> dict[str, Fact]:
    return {f.text: f for f in ctx.index("t", "s").facts.items()}


def _events(ctx: MemoryContext) -> list[Event]:
    return ctx.index("t", "s").events.items()


def _seed(ctx, texts: list[tuple[str, tuple[float, ...]]], people=("Ann",)):
    rec = session_record("s0", 0, WHEN, list(people))
    drafts = [
        draft(rec, t, unit(*v), [t.split()[1].lower()], list(people), index=i)
        for i, (t, v) in enumerate(texts)
    ]
    return commit_facts(ctx, rec, drafts)


def test_first_fact_stands_alone_without_an_llm_call(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    stats = _seed(ctx, [("Ann paints landscapes.", (1, 0, 0, 0))])
    assert stats.facts_stored == 1
    assert _events(ctx) == []
    # verification and event routing both had nothing to compare with
    assert stats.llm_calls == 0 and stats.llm_calls_skipped == 2


def test_candidates_but_none_selected_leaves_the_fact_standalone(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    stats = _seed(
        ctx, [("Ann paints landscapes.", (1, 0, 0, 0)), ("Ann runs marathons.", (0, 1, 0, 0))]
    )
    assert stats.facts_stored == 2 and _events(ctx) == []
    assert all(f.event_ids == [] for f in _facts(ctx).values())


def test_pairing_with_standalone_facts_creates_an_event(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    assert isinstance(ctx.backend, ScriptedBackend)
    ctx.backend.links["Ann bought paint brushes."] = ["Ann paints landscapes."]
    stats = _seed(
        ctx,
        [("Ann paints landscapes.", (1, 0, 0, 0)), ("Ann bought paint brushes.", (0.7, 0.7, 0, 0))],
    )
    events = _events(ctx)
    assert stats.events_created == 1 and len(events) == 1
    facts = _facts(ctx)
    assert set(events[0].fact_ids) == {f.id for f in facts.values()}
    assert all(f.event_ids == [events[0].id] for f in facts.values())
    stored = ctx.store.count(Kind.EVENTS, "t", "s")
    assert stored == 1


def test_a_fact_whose_match_is_in_an_event_is_absorbed(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    ctx.backend.links["Ann bought paint brushes."] = ["Ann paints landscapes."]  # type: ignore[attr-defined]
    ctx.backend.links["Ann framed a painting."] = ["Ann bought paint brushes."]  # type: ignore[attr-defined]
    stats = _seed(
        ctx,
        [
            ("Ann paints landscapes.", (1, 0, 0, 0)),
            ("Ann bought paint brushes.", (0.7, 0.7, 0, 0)),
            ("Ann framed a painting.", (0.5, 0.5, 0.7, 0)),
        ],
    )
    events = _events(ctx)
    assert stats.events_created == 1 and len(events) == 1
    assert len(events[0].fact_ids) == 3
    assert _facts(ctx)["Ann framed a painting."].event_ids == [events[0].id]


def test_a_fact_joins_every_event_of_its_selected_facts(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    links = ctx.backend.links  # type: ignore[attr-defined]
    links["Ann bought paint brushes."] = ["Ann paints landscapes."]
    links["Ann ran in Boston."] = ["Ann runs marathons."]
    links["Ann painted the Boston marathon."] = ["Ann bought paint brushes.", "Ann ran in Boston."]
    _seed(
        ctx,
        [
            ("Ann paints landscapes.", (1, 0, 0, 0)),
            ("Ann runs marathons.", (0, 1, 0, 0)),
            ("Ann bought paint brushes.", (0.7, 0, 0.7, 0)),
            ("Ann ran in Boston.", (0, 0.7, 0.7, 0)),
            ("Ann painted the Boston marathon.", (0.5, 0.5, 0.5, 0.5)),
        ],
    )
    events = _events(ctx)
    assert len(events) == 2
    joined = _facts(ctx)["Ann painted the Boston marathon."]
    assert sorted(joined.event_ids) == sorted(e.id for e in events)
    assert all(joined.id in e.fact_ids for e in events)


def test_selected_standalone_facts_join_the_first_event_with_the_new_fact(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    links = ctx.backend.links  # type: ignore[attr-defined]
    links["Ann bought paint brushes."] = ["Ann paints landscapes."]
    links["Ann sold a painting."] = ["Ann bought paint brushes.", "Ann visits galleries."]
    _seed(
        ctx,
        [
            ("Ann paints landscapes.", (1, 0, 0, 0)),
            ("Ann bought paint brushes.", (0.7, 0.7, 0, 0)),
            ("Ann visits galleries.", (0.6, 0, 0.8, 0)),
            ("Ann sold a painting.", (0.5, 0.5, 0.5, 0.5)),
        ],
    )
    (event,) = _events(ctx)
    facts = _facts(ctx)
    assert facts["Ann visits galleries."].event_ids == [event.id]
    assert facts["Ann sold a painting."].event_ids == [event.id]
    assert len(event.fact_ids) == 4


def test_event_candidates_share_a_participant(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    rec = session_record("s0", 0, WHEN, ["Ann", "Bob"])
    d1 = draft(rec, "Bob paints landscapes.", unit(1, 0, 0, 0), ["paints"], ["Bob"], index=0)
    d2 = draft(rec, "Ann paints portraits.", unit(0.9, 0.1, 0, 0), ["paints"], ["Ann"], index=1)
    commit_facts(ctx, rec, [d1, d2])
    assert ctx.backend.seen_candidates == {}  # type: ignore[attr-defined]


def test_near_duplicate_is_dropped_and_its_turns_kept_as_provenance(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    _seed(ctx, [("Ann paints landscapes.", (1, 0, 0, 0))])
    rec = session_record("s1", 1, WHEN, ["Ann"])
    stats = commit_facts(
        ctx,
        rec,
        [draft(rec, "Ann paints landscapes a lot.", unit(1, 0.05, 0, 0), ["paints"], ["Ann"])],
    )
    assert stats.duplicates_dropped == 1 and stats.facts_stored == 0
    (kept,) = _facts(ctx).values()
    assert kept.all_turn_ids() == ["s0:0", "s1:0"]


def test_same_words_at_disjoint_times_are_not_duplicates(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    rec = session_record("s0", 0, WHEN, ["Ann"])
    may = TimeRange(start=date(2023, 5, 7), end=date(2023, 5, 7))
    june = TimeRange(start=date(2023, 6, 3), end=date(2023, 6, 3))
    stats = commit_facts(
        ctx,
        rec,
        [
            draft(
                rec, "Ann went hiking on 7 May 2023.", unit(1, 0, 0, 0), ["hiking"], ["Ann"], 0, may
            ),
            draft(
                rec,
                "Ann went hiking on 3 June 2023.",
                unit(1, 0.01, 0, 0),
                ["hiking"],
                ["Ann"],
                1,
                june,
            ),
        ],
    )
    assert stats.facts_stored == 2 and stats.duplicates_dropped == 0


def test_conflict_update_rewrites_the_old_fact_and_keeps_its_history(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    _seed(ctx, [("Ann lives in Boston.", (1, 0, 0, 0))])
    old = _facts(ctx)["Ann lives in Boston."]
    ctx.backend.verdicts["Ann lives in Denver."] = VerifyDecision(  # type: ignore[attr-defined]
        store=False, updates=[FactUpdate(fact_id=old.id, text="Ann lives in Denver.")]
    )
    rec = session_record("s1", 1, datetime(2024, 6, 1), ["Ann"])
    stats = commit_facts(
        ctx, rec, [draft(rec, "Ann lives in Denver.", unit(0.8, 0.6, 0, 0), ["lives"], ["Ann"])]
    )
    assert stats.updates == 1 and stats.facts_stored == 0
    (fact,) = _facts(ctx).values()
    assert fact.id == old.id and fact.text == "Ann lives in Denver."
    assert [h.text for h in fact.history] == ["Ann lives in Boston."]
    assert fact.history[0].replaced_by_session == "s1"
    assert ctx.store.count(Kind.FACTS, "t", "s") == 1


def test_verifier_cannot_update_facts_it_was_not_shown(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    _seed(ctx, [("Ann lives in Boston.", (1, 0, 0, 0)), ("Ann owns a cat.", (0, 0, 1, 0))])
    cat = _facts(ctx)["Ann owns a cat."]
    ctx.backend.verdicts["Ann lives in Denver."] = VerifyDecision(  # type: ignore[attr-defined]
        updates=[FactUpdate(fact_id=cat.id, text="rewritten")]
    )
    rec = session_record("s1", 1, WHEN, ["Ann"])
    stats = commit_facts(
        ctx, rec, [draft(rec, "Ann lives in Denver.", unit(0.8, 0.6, 0, 0), ["lives"], ["Ann"])]
    )
    assert stats.updates == 0 and _facts(ctx)["Ann owns a cat."].text == "Ann owns a cat."


def test_event_summary_is_embedded_once_per_commit(tmp_path: Path) -> None:
    encoder = TableEncoder()
    ctx = make_ctx(tmp_path, encoder)
    ctx.backend.links["Ann bought paint brushes."] = ["Ann paints landscapes."]  # type: ignore[attr-defined]
    ctx.backend.links["Ann framed a painting."] = ["Ann bought paint brushes."]  # type: ignore[attr-defined]
    _seed(
        ctx,
        [
            ("Ann paints landscapes.", (1, 0, 0, 0)),
            ("Ann bought paint brushes.", (0.7, 0.7, 0, 0)),
            ("Ann framed a painting.", (0.5, 0.5, 0.7, 0)),
        ],
    )
    assert encoder.calls == 1


def test_an_unchanged_event_summary_keeps_its_vector(tmp_path: Path) -> None:
    encoder = TableEncoder()
    ctx = make_ctx(tmp_path, encoder)
    links = ctx.backend.links  # type: ignore[attr-defined]
    links["Ann bought paint brushes."] = ["Ann paints landscapes."]
    links["Ann framed a painting."] = ["Ann bought paint brushes."]
    links["Ann sold a painting."] = ["Ann framed a painting."]
    _seed(
        ctx,
        [
            ("Ann paints landscapes.", (1, 0, 0, 0)),
            ("Ann bought paint brushes.", (0.7, 0.7, 0, 0)),
            ("Ann framed a painting.", (0.5, 0.5, 0.7, 0)),
        ],
    )
    (event,) = _events(ctx)
    before = ctx.index("t", "s").events.vector(event.id).copy()
    calls = encoder.calls
    # A later fact joins; the rules summary (the first three facts by time) stays the same.
    later = session_record("s1", 1, datetime(2024, 3, 9, 12, 0), ["Ann"])
    commit_facts(
        ctx,
        later,
        [draft(later, "Ann sold a painting.", unit(0.5, 0.4, 0.7, 0.3), ["sold"], ["Ann"])],
    )
    (after,) = _events(ctx)
    assert len(after.fact_ids) == 4 and after.summary == event.summary
    assert encoder.calls == calls  # nothing embedded again
    assert (ctx.index("t", "s").events.vector(event.id) == before).all()


def test_without_skip_rules_every_fact_is_verified_but_none_is_dropped_for_nothing(
    tmp_path: Path,
) -> None:
    ctx = make_ctx(tmp_path)
    ctx.settings.llm.skip_rules = False
    ctx.backend.verdicts["Ann paints landscapes."] = VerifyDecision(store=False)  # type: ignore[attr-defined]
    stats = _seed(ctx, [("Ann paints landscapes.", (1, 0, 0, 0))])
    # asked although nothing is stored yet (no call skipped; the rules backend is no model,
    # so no model call is counted either), and its "do not store" ignored: nothing was
    # shown that could already say it
    assert stats.llm_calls == 0 and stats.llm_calls_skipped == 0
    assert stats.facts_stored == 1


def test_a_jobs_model_call_totals_are_its_metered_calls_summed() -> None:
    used = {
        "llm.extract.calls": 3,
        "llm.verify.calls": 2,
        "llm.verify.skipped": 1,
        "llm.event_link.skipped": 2,
        "llm.prompt_tokens": 500,  # a total, not a stage
        "llm.endpoint.general.calls": 9,  # HTTP calls, failed ones included: not a stage
    }
    stats = CommitStats(llm_usage=used)
    assert (stats.llm_calls, stats.llm_calls_skipped) == (5, 3)
    counts = stats.counts()
    assert (counts["llm_calls"], counts["llm_calls_skipped"]) == (5, 3)
    assert CommitStats.from_counts(counts).counts() == counts


def test_an_event_of_joined_facts_takes_their_mean_with_event_vectors_members(
    tmp_path: Path,
) -> None:
    encoder = TableEncoder()
    ctx = make_ctx(tmp_path, encoder)
    ctx.settings.memory.event_vectors = "members"
    ctx.backend.links["Ann bought paint brushes."] = ["Ann paints landscapes."]  # type: ignore[attr-defined]
    _seed(
        ctx,
        [("Ann paints landscapes.", (1, 0, 0, 0)), ("Ann bought paint brushes.", (0.6, 0.8, 0, 0))],
    )
    (event,) = _events(ctx)
    assert event.summary == "Ann bought paint brushes. Ann paints landscapes."
    assert encoder.calls == 0  # the summary joins the two facts: nothing embedded
    mean = unit(0.8, 0.4, 0, 0)  # (1, 0) and (0.6, 0.8) averaged, made unit length
    assert np.allclose(ctx.index("t", "s").events.vector(event.id), mean, atol=1e-6)


def test_by_default_an_event_summary_is_embedded_even_when_joined_from_facts(
    tmp_path: Path,
) -> None:
    encoder = TableEncoder({"Ann bought paint brushes. Ann paints landscapes.": unit(0, 0, 1, 0)})
    ctx = make_ctx(tmp_path, encoder)
    ctx.backend.links["Ann bought paint brushes."] = ["Ann paints landscapes."]  # type: ignore[attr-defined]
    _seed(
        ctx,
        [("Ann paints landscapes.", (1, 0, 0, 0)), ("Ann bought paint brushes.", (0.6, 0.8, 0, 0))],
    )
    (event,) = _events(ctx)
    assert encoder.calls == 1
    assert np.allclose(ctx.index("t", "s").events.vector(event.id), unit(0, 0, 1, 0))


def test_a_full_event_closes_and_the_next_fact_starts_an_episode_from_its_closest(
    tmp_path: Path,
) -> None:
    ctx = make_ctx(tmp_path)
    ctx.settings.memory.event_max_facts = 3
    links = ctx.backend.links  # type: ignore[attr-defined]
    links["Ann bought paint brushes."] = ["Ann paints landscapes."]
    links["Ann framed a painting."] = ["Ann bought paint brushes."]
    links["Ann sold a painting."] = ["Ann framed a painting."]
    _seed(
        ctx,
        [
            ("Ann paints landscapes.", (1, 0, 0, 0)),
            ("Ann bought paint brushes.", (0.7, 0.7, 0, 0)),
            ("Ann framed a painting.", (0.5, 0.5, 0.7, 0)),
            ("Ann sold a painting.", (0.4, 0.4, 0.6, 0.5)),
        ],
    )
    events = sorted(_events(ctx), key=lambda e: len(e.fact_ids))
    assert [len(e.fact_ids) for e in events] == [2, 3]  # the first closed at three
    facts = _facts(ctx)
    fresh, closed = events
    bridge, sold = facts["Ann framed a painting."], facts["Ann sold a painting."]
    assert set(fresh.fact_ids) == {sold.id, bridge.id}
    # the bridging fact is in both episodes
    assert sorted(facts["Ann framed a painting."].event_ids) == sorted([fresh.id, closed.id])


def test_an_event_never_spans_more_days_than_its_bound(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    ctx.settings.memory.event_max_span_days = 10
    links = ctx.backend.links  # type: ignore[attr-defined]
    links["Ann bought paint brushes."] = ["Ann paints landscapes."]
    links["Ann framed a painting."] = ["Ann bought paint brushes."]
    rec = session_record("s0", 0, WHEN, ["Ann"])
    days = [date(2024, 3, 1), date(2024, 3, 5), date(2024, 3, 12)]
    texts = ["Ann paints landscapes.", "Ann bought paint brushes.", "Ann framed a painting."]
    vectors = [(1, 0, 0, 0), (0.7, 0.7, 0, 0), (0.5, 0.5, 0.7, 0)]
    drafts = [
        draft(rec, t, unit(*v), [t.split()[1].lower()], ["Ann"], i, TimeRange(start=d, end=d))
        for i, (t, v, d) in enumerate(zip(texts, vectors, days, strict=True))
    ]
    commit_facts(ctx, rec, drafts)
    for event in _events(ctx):
        assert event.time_span is not None
        assert (event.time_span.end - event.time_span.start).days <= 10
    assert len(_events(ctx)) == 2  # March 12th starts an episode with March 5th


def test_a_revised_summary_is_asked_with_the_members_it_already_covered(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    links = ctx.backend.links  # type: ignore[attr-defined]
    links["Ann bought paint brushes."] = ["Ann paints landscapes."]
    links["Ann framed a painting."] = ["Ann bought paint brushes."]
    _seed(
        ctx,
        [("Ann paints landscapes.", (1, 0, 0, 0)), ("Ann bought paint brushes.", (0.7, 0.7, 0, 0))],
    )
    asked: list[tuple[list[str], list[str] | None]] = []
    summarize = ctx.backend.summarize_events

    def recording(
        items: list[tuple[list[FactView], EventSummary | None]],
    ) -> list[EventSummary]:
        asked.extend(([f.id for f in fs], None if p is None else p.sources) for fs, p in items)
        return summarize(items)

    ctx.backend.summarize_events = recording  # type: ignore[method-assign]
    rec = session_record("s1", 1, WHEN, ["Ann"])
    framed = draft(rec, "Ann framed a painting.", unit(0.5, 0.5, 0.7, 0), ["framed"], ["Ann"])
    commit_facts(ctx, rec, [framed])
    facts = _facts(ctx)
    ((members, covered),) = asked
    assert covered is not None
    earlier = {facts["Ann paints landscapes."].id, facts["Ann bought paint brushes."].id}
    assert set(covered) == earlier
    assert facts["Ann framed a painting."].id in members and len(members) == 3
