"""Reads of stored memory, as the query workers answer them for producers that never open the
store: the tenant's spaces, a page of a space's facts, events, profiles or sessions, or one of
them by id with its history and provenance."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from typing import TypeVar

from pydantic import BaseModel

from common.context import MemoryContext
from common.errors import InvalidInput, NotFound
from common.models.api import ListingFilter
from common.models.jobs import ReadPayload, ReadWhat
from common.models.memory import Event, Fact, Profile
from common.models.responses import (
    Page,
    SessionSummary,
    Space,
    SpaceCounts,
    SpaceList,
    StoredSession,
)
from common.store import records
from common.store.space_index import KindIndex

Record = TypeVar("Record", Fact, Event, Profile)
Reader = Callable[[MemoryContext, ReadPayload, str], BaseModel]


def read(ctx: MemoryContext, p: ReadPayload) -> BaseModel:
    """What `p` asks for, from the store and the space's index."""
    if p.what == "spaces":
        spaces = records.list_spaces(ctx.store, p.tenant)
        return SpaceList(items=[space(ctx, p.tenant, s.space) for s in spaces])
    if p.space is None:
        raise InvalidInput(f"a read of {p.what!r} names its space")
    records.require_space(ctx.store, p.tenant, p.space)
    return READERS[p.what](ctx, p, p.space)


def space(ctx: MemoryContext, tenant: str, name: str) -> Space:
    """The space with its counts; `UnknownSpace` when the tenant has none of that name."""
    record = records.require_space(ctx.store, tenant, name)
    return Space(
        name=record.space,
        created_at=record.created_at,
        participants=record.participants,
        counts=SpaceCounts(**records.space_counts(ctx.store, tenant, name)),
    )


def _one(items: KindIndex[Record], p: ReadPayload, kind: str) -> Record:
    found = None if p.item_id is None else items.find(p.item_id)
    if found is None:
        raise NotFound(f"no {kind} {p.item_id!r} in space {p.space!r}")
    return found


def _page(items: list[Record], p: ReadPayload) -> Page[Record]:
    return Page(total=len(items), offset=p.offset, items=items[p.offset : p.offset + p.limit])


def _session(ctx: MemoryContext, p: ReadPayload, space: str) -> StoredSession:
    found = None
    if p.item_id is not None:
        found = records.get_session(ctx.store, p.tenant, space, p.item_id)
    if found is None:
        raise NotFound(f"no session {p.item_id!r} in space {space!r}")
    return StoredSession.of(found)


def _sessions(ctx: MemoryContext, p: ReadPayload, space: str) -> Page[SessionSummary]:
    """Stored sessions in session order."""
    stored = sorted(
        records.list_sessions(ctx.store, p.tenant, space),
        key=lambda r: (r.seq, r.session.session_id),
    )
    page = stored[p.offset : p.offset + p.limit]
    return Page(total=len(stored), offset=p.offset, items=[SessionSummary.of(r) for r in page])


def _facts(ctx: MemoryContext, p: ReadPayload, space: str) -> Page[Fact]:
    """Facts in session order, narrowed by `p.narrow`."""
    index = ctx.index(p.tenant, space)
    facts = _chosen(index.facts, p.narrow, "facts")
    if p.narrow is not None:
        if p.narrow.session_ids is not None:
            sessions = set(p.narrow.session_ids)
            facts = [f for f in facts if sessions & fact_sessions(f)]
        if p.narrow.event_ids is not None:
            members = {
                fact_id
                for event_id in p.narrow.event_ids
                if (event := index.events.find(event_id)) is not None
                for fact_id in event.fact_ids
            }
            facts = [f for f in facts if f.id in members]
        facts = [f for f in facts if _has_words(p.narrow, f.text)]
    return _page(sorted(facts, key=lambda f: (f.source.session_seq, f.source.positions, f.id)), p)


def _events(ctx: MemoryContext, p: ReadPayload, space: str) -> Page[Event]:
    """Events in time order (by the first day of their span; undated ones last)."""
    events = _chosen(ctx.index(p.tenant, space).events, p.narrow, "events")
    if p.narrow is not None:
        events = [e for e in events if _has_words(p.narrow, e.summary, *e.keywords)]
    return _page(sorted(events, key=_event_order), p)


def _profiles(ctx: MemoryContext, p: ReadPayload, space: str) -> Page[Profile]:
    """Profiles by person, then when each first held, narrowed by `p.narrow`."""
    profiles = _chosen(ctx.index(p.tenant, space).profiles, p.narrow, "profiles")
    if p.narrow is not None:
        profiles = [r for r in profiles if _has_words(p.narrow, *_profile_texts(r))]
    return _page(sorted(profiles, key=_profile_order), p)


def fact_sessions(fact: Fact) -> set[str]:
    """The sessions a fact came from: the one that first stated it, and those that repeated
    or updated it."""
    return {fact.source.session_id, *(s.session_id for s in fact.also_from)}


def _chosen(items: KindIndex[Record], narrow: ListingFilter | None, kind: str) -> list[Record]:
    """The items `narrow.ids` names (those stored), or all; a filter the listing of `kind`
    does not take is refused by name."""
    if narrow is None:
        return items.items()
    narrow.check_listing(kind)
    if narrow.ids is None:
        return items.items()
    return [r for i in dict.fromkeys(narrow.ids) if (r := items.find(i)) is not None]


def _has_words(narrow: ListingFilter, *texts: str) -> bool:
    """Whether every word of the filter's text is in one of `texts` (case ignored)."""
    haystack = "\n".join(texts).casefold()
    return all(word in haystack for word in narrow.words)


def _profile_order(profile: Profile) -> tuple[str, date, str]:
    """By person, then when each first held."""
    first = min([profile.t_from, *(v.t_from for v in profile.history)])
    return (profile.person, first, profile.id)


def _profile_texts(profile: Profile) -> list[str]:
    """What a text filter reads of a profile: its person, keywords and every version."""
    return [
        profile.person,
        profile.content,
        *profile.keywords,
        *(v.content for v in profile.history),
    ]


def _event_order(event: Event) -> tuple[bool, date, str]:
    span = event.time_span
    return (span is None, date.max if span is None else span.start, event.id)


READERS: dict[ReadWhat, Reader] = {
    "space": lambda ctx, p, name: space(ctx, p.tenant, name),
    "facts": _facts,
    "fact": lambda ctx, p, name: _one(ctx.index(p.tenant, name).facts, p, "fact"),
    "events": _events,
    "event": lambda ctx, p, name: _one(ctx.index(p.tenant, name).events, p, "event"),
    "profiles": _profiles,
    "profile": lambda ctx, p, name: _one(ctx.index(p.tenant, name).profiles, p, "profile"),
    "sessions": _sessions,
    "session": _session,
}
