"""Erasure: a fact, a session's contribution, or a whole space, from every place it reached.

What a fact or session left behind is found by reference, not by replaying history:
events listing an erased fact lose it (an event left empty is deleted; one left with
members is re-summarised from them, so its summary no longer carries the erased text);
profile versions whose every piece of evidence is erased are dropped (a profile whose
current version goes falls back to its latest remaining one, or is deleted); facts a
session updated get back the state before its update; provenance naming the session is
removed. Every step is computed from what is stored, so re-running an interrupted erasure
finishes it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from common.llm.contracts import EventSummary, FactView
from common.memory.changes import Changes, apply_plan
from common.memory.context import MemoryContext
from common.memory.verify import view
from common.models.memory import Event, Fact, FactRevision, FactTime, Profile
from common.store import records
from common.store.qdrant import Kind
from common.store.space_index import SpaceIndex


@dataclass
class ErasureReport:
    """What an erasure removed or rewrote, by id."""

    facts_deleted: list[str] = field(default_factory=list)
    facts_rewritten: list[str] = field(default_factory=list)
    events_deleted: list[str] = field(default_factory=list)
    events_rewritten: list[str] = field(default_factory=list)
    profiles_deleted: list[str] = field(default_factory=list)
    profiles_rewritten: list[str] = field(default_factory=list)
    sessions_deleted: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, list[str]]:
        return {name: sorted(getattr(self, name)) for name in self.__dataclass_fields__}


def erase_facts(
    ctx: MemoryContext, tenant: str, space: str, fact_ids: set[str], report: ErasureReport
) -> None:
    """Delete facts and rewrite or delete what was built from them."""
    index = ctx.index(tenant, space)
    _erase_facts(ctx, index, fact_ids, Changes(), report)


def erase_session(
    ctx: MemoryContext, tenant: str, space: str, session_id: str, report: ErasureReport
) -> None:
    """Delete a session's raw record and everything it contributed to the space."""
    index = ctx.index(tenant, space)
    changes = Changes()
    gone: set[str] = set()
    for fact in index.facts.items():
        kept = _without_session(fact, session_id)
        if kept is None:
            gone.add(fact.id)
        elif kept is not fact:
            vector = index.facts.vector(fact.id)
            if kept.text != fact.text:
                vector = ctx.embedder.encode([kept.text])[0]
            index.put_fact(kept, vector)
            changes.fact(kept, vector)
            report.facts_rewritten.append(fact.id)
    _erase_facts(ctx, index, gone, changes, report)
    records.delete_session(ctx.store, tenant, space, session_id)
    report.sessions_deleted.append(session_id)


def erase_space(ctx: MemoryContext, tenant: str, space: str, report: ErasureReport) -> None:
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


def _erase_facts(
    ctx: MemoryContext,
    index: SpaceIndex,
    fact_ids: set[str],
    changes: Changes,
    report: ErasureReport,
) -> None:
    events_gone = _rewrite_events(ctx, index, fact_ids, changes, report)
    for fact in index.facts.items():
        if fact.id in fact_ids or not set(fact.event_ids) & events_gone:
            continue
        kept = fact.model_copy(
            update={"event_ids": [e for e in fact.event_ids if e not in events_gone]}
        )
        vector = changes.vectors.get((Kind.FACTS, fact.id), index.facts.vector(fact.id))
        index.put_fact(kept, vector)
        changes.fact(kept, vector)
    _rewrite_profiles(index, fact_ids, changes, report)
    apply_plan(ctx.store, changes.plan())
    deletes = {
        Kind.FACTS: [f for f in fact_ids if f in index.facts],
        Kind.EVENTS: sorted(events_gone),
        Kind.PROFILES: list(report.profiles_deleted),
    }
    for kind, gone in deletes.items():
        ctx.store.delete(kind, index.tenant, index.space, gone)
    for fid in deletes[Kind.FACTS]:
        index.facts.remove(fid)
    for eid in events_gone:
        index.events.remove(eid)
    for pid in report.profiles_deleted:
        index.profiles.remove(pid)
    report.facts_deleted += sorted(fact_ids)
    ctx.committed(index)


def _rewrite_events(
    ctx: MemoryContext,
    index: SpaceIndex,
    fact_ids: set[str],
    changes: Changes,
    report: ErasureReport,
) -> set[str]:
    """Drop erased members; delete emptied events, re-summarise the others. Returns the
    ids of deleted events."""
    gone: set[str] = set()
    rewrite: list[Event] = []
    for event in index.events.items():
        if not set(event.fact_ids) & fact_ids:
            continue
        members = [f for f in event.fact_ids if f not in fact_ids and f in index.facts]
        if not members:
            gone.add(event.id)
            report.events_deleted.append(event.id)
            continue
        rewrite.append(event.model_copy(update={"fact_ids": members}))
    if rewrite:
        asks: list[tuple[list[FactView], EventSummary | None]] = [
            ([view(index.facts.get(f)) for f in e.fact_ids], None) for e in rewrite
        ]
        summaries = ctx.backend.summarize_events(asks)
        vectors = ctx.embedder.encode([s.summary for s in summaries])
        for event, summary, vector in zip(rewrite, summaries, vectors, strict=True):
            event = event.model_copy(
                update={"summary": summary.summary, "keywords": summary.keywords}
            )
            index.put_event(event, vector)
            changes.event(event, vector)
            report.events_rewritten.append(event.id)
    return gone


def _rewrite_profiles(
    index: SpaceIndex, fact_ids: set[str], changes: Changes, report: ErasureReport
) -> None:
    for profile in index.profiles.items():
        kept = _profile_without(profile, fact_ids)
        if kept is profile:
            continue
        if kept is None:
            report.profiles_deleted.append(profile.id)
            continue
        vector = index.profiles.vector(profile.id)
        index.put_profile(kept, vector)
        changes.profile(kept, vector)
        report.profiles_rewritten.append(profile.id)


def _profile_without(profile: Profile, fact_ids: set[str]) -> Profile | None:
    """The profile without the versions that only erased facts support; None if nothing
    is left; the same object if nothing changed."""
    touched = set(profile.evidence_fact_ids) & fact_ids or any(
        set(v.evidence_fact_ids) & fact_ids for v in profile.history
    )
    if not touched:
        return profile
    history = []
    for version in profile.history:
        evidence = [e for e in version.evidence_fact_ids if e not in fact_ids]
        if evidence:
            history.append(version.model_copy(update={"evidence_fact_ids": evidence}))
    evidence = [e for e in profile.evidence_fact_ids if e not in fact_ids]
    if evidence:
        return profile.model_copy(update={"evidence_fact_ids": evidence, "history": history})
    if not history:
        return None
    latest = max(history, key=lambda v: v.t_from)
    history.remove(latest)
    return profile.model_copy(
        update={
            "content": latest.content,
            "keywords": latest.keywords,
            "evidence_fact_ids": latest.evidence_fact_ids,
            "t_from": latest.t_from,
            "history": history,
        }
    )


def _without_session(fact: Fact, session_id: str) -> Fact | None:
    """The fact as if `session_id` had never been ingested: None when nothing else
    supports it, the same object when the session never touched it."""
    also = [s for s in fact.also_from if s.session_id != session_id]
    # States of the fact's text in order, each with the session that wrote it.
    states: list[tuple[str, str, list[str], FactTime]] = [
        (fact.source.session_id, r.text, r.keywords, r.time) for r in fact.history[:1]
    ]
    for prev, rev in zip(fact.history, fact.history[1:], strict=False):
        states.append((prev.replaced_by_session, rev.text, rev.keywords, rev.time))
    last_author = fact.history[-1].replaced_by_session if fact.history else fact.source.session_id
    states.append((last_author, fact.text, fact.keywords, fact.time))
    kept_states = [s for s in states if s[0] != session_id]
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
            replaced_by_session=next_author,
            replaced_with_fact=fact.id,
        )
        for (_, t, k, when), (next_author, *_) in zip(earlier, kept_states[1:], strict=True)
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
