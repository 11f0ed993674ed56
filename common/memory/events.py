"""Event consolidation (Algorithm 1): a new fact stands alone, pairs with facts, or joins events."""

from __future__ import annotations

import numpy as np

from common.context import MemoryContext
from common.llm import usage
from common.llm.contracts import EventSummary, FactView
from common.memory.changes import Changes, CommitStats
from common.memory.verify import view
from common.models import ids
from common.models.memory import Event, Fact, TimeRange
from common.settings import MemorySettings
from common.similarity import TextQuery
from common.store.space_index import SpaceIndex


def _span(a: TimeRange | None, b: TimeRange) -> TimeRange:
    return b if a is None else a.union(b)


def _merged(names: list[str], more: list[str]) -> list[str]:
    return names + [n for n in more if n not in names]


def _link(index: SpaceIndex, event: Event, fact: Fact, changes: Changes) -> Event:
    """Add `fact` to `event` and the event to the fact, in the index and the change set.
    The event's summary now lags its facts (`Event.summarized`) until `refresh_events`."""
    if fact.id not in event.fact_ids:
        covered = len(event.fact_ids) if event.summarized is None else event.summarized
        event = event.model_copy(
            update={
                "fact_ids": [*event.fact_ids, fact.id],
                "participants": _merged(event.participants, fact.participants),
                "time_span": _span(event.time_span, fact.time.effective()),
                "summarized": covered,
            }
        )
    if event.id not in fact.event_ids:
        fact = fact.model_copy(update={"event_ids": [*fact.event_ids, event.id]})
        vector = index.facts.vector(fact.id).copy()
        index.put_fact(fact, vector)
        changes.fact(fact, vector)
    return event


def _has_room(settings: MemorySettings, event: Event, fact: Fact) -> bool:
    """Whether `fact` may still join `event`: an event is an episode, so it closes once it
    holds `event_max_facts` or would span more than `event_max_span_days`."""
    if len(event.fact_ids) >= settings.event_max_facts:
        return False
    span = _span(event.time_span, fact.time.effective())
    return (span.end - span.start).days <= settings.event_max_span_days


def _fitting(
    settings: MemorySettings, index: SpaceIndex, fact: Fact, others: list[str], most: int
) -> list[str]:
    """`fact` and, in order, those of `others` that keep a new event within its bounds (at
    most `most` members)."""
    span = fact.time.effective()
    members = [fact.id]
    for other in others:
        if len(members) >= most:
            break
        wider = span.union(index.facts.get(other).time.effective())
        if (wider.end - wider.start).days <= settings.event_max_span_days:
            members.append(other)
            span = wider
    return members


def route_event(
    ctx: MemoryContext,
    index: SpaceIndex,
    fact: Fact,
    vector: np.ndarray,
    changes: Changes,
    stats: CommitStats,
) -> set[str]:
    """Place a stored fact into events; return the ids of the events it created or joined
    (their summaries now lag their facts)."""
    mask = index.facts.mask(fact.participants)
    similar = index.facts.hybrid(
        vector,
        TextQuery.of(fact.text, fact.keywords),
        ctx.settings.similarity,
        mask,
        k=ctx.settings.memory.event_candidate_top_k,
        exclude={fact.id},
    )
    if not similar and ctx.settings.llm.skip_rules:
        usage.skipped("event_link")
        return set()  # no candidate: the fact stands alone
    picked = set(
        ctx.backend.link_event(view(fact), [view(index.facts.get(s.id), s.score) for s in similar])
    )
    selected = [s.id for s in similar if s.id in picked]
    if not selected:
        return set()  # candidates, none about the same happening: stands alone

    memory = ctx.settings.memory
    event_ids: list[str] = []
    for fid in selected:
        event_ids.extend(e for e in index.facts.get(fid).event_ids if e not in event_ids)
    event_ids = [e for e in event_ids if e in index.events]
    open_ids = [e for e in event_ids if _has_room(memory, index.events.get(e), fact)]
    loners = [fid for fid in selected if not index.facts.get(fid).event_ids]

    if not open_ids:
        # Pair: a new event from the new fact and the selected standalone facts that fit its
        # bounds. When every event of the selected facts is closed, the new episode starts
        # from the closest selected fact that fits (a fact may belong to several events).
        if loners or not event_ids:
            members = _fitting(memory, index, fact, loners, memory.event_max_facts)
        else:
            members = _fitting(memory, index, fact, selected, 2)
        if len(members) < 2:
            return set()  # nothing fits beside it: the fact stands alone
        event = Event(  # its summary and vector stand in until the first refresh
            id=ids.event_id(index.tenant, index.space, fact.id),
            tenant=index.tenant,
            space=index.space,
            summary=fact.text,
            fact_ids=[],
            participants=[],
            keywords=list(fact.keywords),
            summarized=0,
        )
        for member_id in members:
            event = _link(index, event, index.facts.get(member_id), changes)
        index.put_event(event, vector.copy())
        stats.events_created += 1
        return {event.id}

    # Absorb: the fact joins every open event of its selected facts; selected facts that
    # stand alone join the first of those events with it, while it has room.
    for n, eid in enumerate(open_ids):
        event = _link(index, index.events.get(eid), index.facts.get(fact.id), changes)
        if n == 0:
            for fid in loners:
                loner = index.facts.get(fid)
                if _has_room(memory, event, loner):
                    event = _link(index, event, loner, changes)
        index.put_event(event, index.events.vector(eid).copy())
    return set(open_ids)


def _mean_of(index: SpaceIndex, fact_ids: list[str]) -> np.ndarray:
    """The unit-length mean of the facts' vectors."""
    mean: np.ndarray = np.mean([index.facts.vector(f) for f in fact_ids], axis=0)
    norm = float(np.linalg.norm(mean))
    return (mean / norm if norm > 0 else mean).astype(np.float32)


def settle_events(
    ctx: MemoryContext,
    index: SpaceIndex,
    touched: set[str],
    changes: Changes,
    stats: CommitStats,
    defer: bool = False,
) -> None:
    """The events a commit `touched` into its change set, with their summaries brought up
    to date together with every other event whose summary lags (`refresh_events`) — unless
    `defer` (the space's next session is ready to commit) and fewer than
    `memory.event_refresh_batch` events lag: then they are written as they stand, and a
    later commit revises them in one batch with what it adds (an event that several
    sessions in a row join is summarised and embedded once)."""
    stale = index.stale_events()
    if defer and len(stale) < ctx.settings.memory.event_refresh_batch:
        for eid in sorted(touched):
            changes.event(index.events.get(eid), index.events.vector(eid).copy())
        return
    refresh_events(ctx, index, stale, changes, stats)
    for eid in sorted(touched - set(stale)):  # joined, with nothing new to summarise
        changes.event(index.events.get(eid), index.events.vector(eid).copy())


def refresh_events(
    ctx: MemoryContext,
    index: SpaceIndex,
    event_ids: list[str],
    changes: Changes,
    stats: CommitStats,
) -> None:
    """Summarise the events again and embed the summaries that changed, in one batch. An
    event with a summary is revised from it: its ask carries that summary with the members
    it covered (`sources`), so a model reads the summary and only the facts added since,
    never every member again."""
    if not event_ids:
        return
    ordered = [index.events.get(eid) for eid in sorted(event_ids)]
    asks: list[tuple[list[FactView], EventSummary | None]] = []
    for event in ordered:
        members = [view(index.facts.get(fid)) for fid in event.fact_ids if fid in index.facts]
        covered = event.fact_ids if event.summarized is None else event.fact_ids[: event.summarized]
        previous = None
        if covered:  # a new event's summary only stands in: nothing to revise yet
            previous = EventSummary(
                summary=event.summary, keywords=event.keywords, sources=list(covered)
            )
        asks.append((members, previous))
    summaries = ctx.backend.summarize_events(asks)
    events = [
        event.model_copy(
            update={"summary": summary.summary, "keywords": summary.keywords, "summarized": None}
        )
        for event, summary in zip(ordered, summaries, strict=True)
    ]
    # An unchanged summary keeps its vector. With `memory.event_vectors=members`, one joined
    # from member facts (`sources`) takes their normalised mean: embedding the joined texts
    # costs a commit about what embedding all of its facts did in extraction (longer texts,
    # in small batches). Only the other new texts go to the embedder.
    mean_vectors = ctx.settings.memory.event_vectors == "members"
    fresh: dict[str, np.ndarray] = {}
    todo: list[Event] = []
    for event, summary in zip(events, summaries, strict=True):
        if event.summary == index.events.get(event.id).summary:
            continue
        if mean_vectors and summary.sources and all(f in index.facts for f in summary.sources):
            fresh[event.id] = _mean_of(index, summary.sources)
        else:
            todo.append(event)
    if todo:
        vectors = ctx.embedder.encode([e.summary for e in todo])
        fresh |= {e.id: v for e, v in zip(todo, vectors, strict=True)}
    for event in events:
        vec = fresh[event.id] if event.id in fresh else index.events.vector(event.id).copy()
        index.put_event(event, vec)
        changes.event(event, vec)
    stats.events_touched += len(events)
