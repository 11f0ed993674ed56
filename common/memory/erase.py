"""Erasure: a fact, a session's contribution, or a whole space, from every place it reached.

What a fact or session left behind is found by reference, not by replaying history. A
session's wording goes from every fact it stated or updated (a fact keeps the states other
sessions or corrections wrote; one with none left, or with no session left behind it, is
deleted). Whatever was derived from an erased fact, or from a fact whose erased wording was
rewritten away, is rebuilt: its events are re-summarised afresh from their remaining members
(an event left empty is deleted), and each profile version citing it is rebuilt from its
other evidence or dropped (a profile whose current version goes falls back to its latest
remaining one, or is deleted), while a rewritten fact a profile cited goes through the
profile batch again under its surviving text. Every step is computed from what is stored,
and derived records are deleted before facts are rewritten, so re-running an interrupted
erasure finishes it.
"""

from __future__ import annotations

from contextlib import AbstractContextManager

from common.context import MemoryContext
from common.llm.contracts import EventSummary, FactView
from common.memory.changes import Changes, CommitStats, apply_plan
from common.memory.profiles import cited_facts, profile_without, run_profile_batch
from common.memory.verify import view
from common.memory.version import memory_version
from common.models.memory import Correction, Event, Fact, FactRevision, FactTime, Profile
from common.models.plan import Plan
from common.models.responses import Erased
from common.store import records
from common.store.base import Kind
from common.store.space_index import SpaceIndex


def erase_facts(
    ctx: MemoryContext, tenant: str, space: str, fact_ids: set[str], report: Erased
) -> None:
    """Delete facts and rewrite or delete what was built from them."""
    with _reload_on_failure(ctx, tenant, space):
        changes = Changes(version=memory_version(ctx.settings))
        _erase_facts(ctx, ctx.index(tenant, space), fact_ids, set(), changes, report)


def erase_session(
    ctx: MemoryContext, tenant: str, space: str, session_id: str, report: Erased
) -> None:
    """Delete a session's raw record and everything it contributed to the space."""
    with _reload_on_failure(ctx, tenant, space):
        index = ctx.index(tenant, space)
        changes = Changes(version=memory_version(ctx.settings))
        gone: set[str] = set()
        reworded: set[str] = set()
        for fact in index.facts.items():
            kept = _without_session(fact, session_id)
            if kept is None:
                gone.add(fact.id)
            elif kept is not fact:
                vector = index.facts.vector(fact.id)
                if kept.text != fact.text:
                    vector = ctx.embedder.encode([kept.text])[0]
                if kept.text != fact.text or kept.history != fact.history:
                    reworded.add(fact.id)
                index.put_fact(kept, vector)
                changes.fact(kept, vector)
        _erase_facts(ctx, index, gone, reworded, changes, report)
    records.delete_session(ctx.store, tenant, space, session_id)
    report.sessions_deleted.append(session_id)


def erase_space(ctx: MemoryContext, tenant: str, space: str, report: Erased) -> None:
    """Delete every point of the space, its registry entry last (so a rerun finds it)."""
    index = ctx.index(tenant, space)
    report.facts_deleted += [f.id for f in index.facts.items()]
    report.events_deleted += [e.id for e in index.events.items()]
    report.profiles_deleted += [p.id for p in index.profiles.items()]
    report.sessions_deleted += [
        r.session.session_id for r in records.list_sessions(ctx.store, tenant, space)
    ]
    for kind in (Kind.FACTS, Kind.EVENTS, Kind.PROFILES, Kind.SESSIONS, Kind.SPACES):
        ctx.store.delete_scope(kind, tenant, space)
    ctx.indexes.drop(tenant, space)


def rebuild_reworded(
    ctx: MemoryContext, index: SpaceIndex, reworded: set[str], changes: Changes, report: Erased
) -> None:
    """Rebuild what was derived from the `reworded` facts (already rewritten in `changes`
    and in `index`) as an erasure rebuilds it, then write it all, derived records first."""
    _erase_facts(ctx, index, set(), reworded, changes, report)


def _reload_on_failure(ctx: MemoryContext, tenant: str, space: str) -> AbstractContextManager[None]:
    """The in-memory index may hold half an erasure when it fails: reload it next time
    (and take no saved copy of it while the erasure runs)."""
    return ctx.changing(tenant, space)


def _erase_facts(
    ctx: MemoryContext,
    index: SpaceIndex,
    fact_ids: set[str],
    reworded: set[str],
    changes: Changes,
    report: Erased,
) -> None:
    """Delete `fact_ids`; rebuild what was derived from them or from the erased wording of
    the `reworded` facts (already rewritten in `changes`)."""
    events_gone = _rewrite_events(ctx, index, fact_ids, reworded, changes, report)
    live_events = {e.id for e in index.events.items()} - events_gone
    for fact in index.facts.items():
        # Ids of events already deleted by an interrupted run count as gone too.
        if fact.id in fact_ids or set(fact.event_ids) <= live_events:
            continue
        kept = fact.model_copy(
            update={"event_ids": [e for e in fact.event_ids if e in live_events]}
        )
        vector = changes.vectors.get((Kind.FACTS, fact.id), index.facts.vector(fact.id))
        index.put_fact(kept, vector)
        changes.fact(kept, vector)
    profiles_gone = _rewrite_profiles(ctx, index, fact_ids, reworded, changes, report)
    # Derived records go first: a rerun after a crash here still finds every fact as it
    # was, so it recomputes the same rewrite.
    ctx.store.delete(Kind.EVENTS, index.tenant, index.space, sorted(events_gone))
    ctx.store.delete(Kind.PROFILES, index.tenant, index.space, sorted(profiles_gone))
    # Rewritten events and profiles before the facts, for the same reason: until the facts
    # are written, a rerun still sees the erased wording and rebuilds what came from it.
    plan = changes.plan()
    for kind in (Kind.EVENTS, Kind.PROFILES, Kind.FACTS):
        apply_plan(ctx.store, Plan(points=[p for p in plan.points if p.kind == kind.value]))
    facts_gone = [f for f in fact_ids if f in index.facts]
    ctx.store.delete(Kind.FACTS, index.tenant, index.space, facts_gone)
    for fid in facts_gone:
        index.remove_fact(fid)
    for eid in events_gone:
        index.remove_event(eid)
    for pid in profiles_gone:
        index.profiles.remove(pid)
    report.facts_deleted += sorted(fact_ids)
    # Everything written is in the receipt, whichever step rewrote it.
    report.facts_rewritten += sorted(changes.facts)
    report.events_rewritten += sorted(changes.events)
    report.profiles_rewritten += sorted(changes.profiles)
    ctx.committed(index)


def _rewrite_events(
    ctx: MemoryContext,
    index: SpaceIndex,
    fact_ids: set[str],
    reworded: set[str],
    changes: Changes,
    report: Erased,
) -> set[str]:
    """Drop erased members; delete emptied events, re-summarise the others afresh from
    their members as they now read (never from the old summary). Returns the ids of
    deleted events."""
    gone: set[str] = set()
    rewrite: list[Event] = []
    for event in index.events.items():
        if not set(event.fact_ids) & (fact_ids | reworded):
            continue
        members = [
            index.facts.get(f) for f in event.fact_ids if f not in fact_ids and f in index.facts
        ]
        if not members:
            gone.add(event.id)
            report.events_deleted.append(event.id)
            continue
        participants: list[str] = []
        for fact in members:
            participants += [p for p in fact.participants if p not in participants]
        span = members[0].time.effective()
        for fact in members[1:]:
            span = span.union(fact.time.effective())
        rewrite.append(
            event.model_copy(
                update={
                    "fact_ids": [f.id for f in members],
                    "participants": participants,
                    "time_span": span,
                }
            )
        )
    if rewrite:
        asks: list[tuple[list[FactView], EventSummary | None]] = [
            ([view(index.facts.get(f)) for f in e.fact_ids], None) for e in rewrite
        ]
        summaries = ctx.backend.summarize_events(asks)
        vectors = ctx.embedder.encode([s.summary for s in summaries])
        for event, summary, vector in zip(rewrite, summaries, vectors, strict=True):
            event = event.model_copy(
                update={
                    "summary": summary.summary,
                    "keywords": summary.keywords,
                    "summarized": None,
                }
            )
            index.put_event(event, vector)
            changes.event(event, vector)
    return gone


def _rewrite_profiles(
    ctx: MemoryContext,
    index: SpaceIndex,
    fact_ids: set[str],
    reworded: set[str],
    changes: Changes,
    report: Erased,
) -> set[str]:
    """Rebuild every profile version that cites an erased or reworded fact from its other
    evidence (or drop it), and send reworded facts that profiles cited through the profile
    batch again, so their surviving wording is profiled as if first said. Returns the ids
    of deleted profiles."""
    tainted = fact_ids | reworded
    touched = [p for p in index.profiles.items() if tainted & cited_facts(p)]
    if not touched:
        return set()
    remaining = {f for p in touched for f in cited_facts(p)} - tainted
    views = [view(index.facts.get(f)) for f in sorted(remaining) if f in index.facts]
    candidates = ctx.backend.profile_candidates(views) if views else []
    gone: set[str] = set()
    rebuilt: list[Profile] = []
    for profile in touched:
        kept = profile_without(profile, tainted, candidates)
        if kept is None:
            gone.add(profile.id)
        else:
            rebuilt.append(kept)
    if rebuilt:
        vectors = ctx.embedder.encode([p.content for p in rebuilt])
        for profile, vector in zip(rebuilt, vectors, strict=True):
            index.put_profile(profile, vector)
            changes.profile(profile, vector)
    requeue = [f for f in reworded if any(f in cited_facts(p) for p in touched)]
    for fid in sorted(requeue):
        fact = index.facts.get(fid).model_copy(update={"profile_pending": True})
        vector = changes.vectors.get((Kind.FACTS, fid), index.facts.vector(fid))
        index.put_fact(fact, vector)
        changes.fact(fact, vector)
    for pid in gone:
        index.profiles.remove(pid)  # the batch below must not match a deleted profile
    if requeue:
        run_profile_batch(ctx, index, changes, CommitStats())
    gone -= set(changes.profiles)  # re-created under the same id by the batch
    report.profiles_deleted += sorted(gone)
    return gone


# Who wrote a state of a fact's text: the session, or the correction (with no session).
Author = tuple[str | None, Correction | None]


def _author(revision: FactRevision) -> Author:
    """Who replaced `revision`'s text."""
    return revision.replaced_by_session, revision.correction


def _without_session(fact: Fact, session_id: str) -> Fact | None:
    """The fact as if `session_id` had never been ingested: None when nothing else
    supports it, the same object when the session never touched it."""
    also = [s for s in fact.also_from if s.session_id != session_id]
    # States of the fact's text in order, each with who wrote it: a session, or a correction
    # (which no session's erasure takes back).
    first: Author = (fact.source.session_id, None)
    states: list[tuple[Author, str, list[str], FactTime]] = [
        (first, r.text, r.keywords, r.time) for r in fact.history[:1]
    ]
    for prev, rev in zip(fact.history, fact.history[1:], strict=False):
        states.append((_author(prev), rev.text, rev.keywords, rev.time))
    last_author = _author(fact.history[-1]) if fact.history else first
    states.append((last_author, fact.text, fact.keywords, fact.time))
    kept_states = [s for s in states if s[0][0] != session_id]
    source = fact.source
    if source.session_id == session_id:
        if not also:
            return None
        source, also = also[0], also[1:]
    if len(kept_states) == len(states) and len(also) == len(fact.also_from):
        return fact
    if not kept_states:
        return None
    *earlier, (_, text, keywords, time) = kept_states
    history = [
        FactRevision(
            text=t,
            keywords=k,
            time=when,
            replaced_by_session=next_session,
            replaced_with_fact=fact.id,
            correction=correction,
        )
        for (_, t, k, when), ((next_session, correction), *_) in zip(
            earlier, kept_states[1:], strict=True
        )
    ]
    return fact.model_copy(
        update={
            "text": text,
            "keywords": keywords,
            "time": time,
            "source": source,
            "also_from": also,
            "history": history,
        }
    )
