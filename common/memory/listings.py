"""Reads of stored memory, as the query workers answer them for producers that never open the
store: the tenant's spaces, a page of a space's facts, events, profiles or sessions, or one of
them by id with its history and provenance."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from pydantic import BaseModel

from common.context import MemoryContext
from common.errors import InvalidInput, NotFound
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
    if p.item_id is None or p.item_id not in items:
        raise NotFound(f"no {kind} {p.item_id!r} in space {p.space!r}")
    return items.get(p.item_id)


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
    """Facts in session order."""
    facts = ctx.index(p.tenant, space).facts.items()
    return _page(sorted(facts, key=lambda f: (f.source.session_seq, f.source.positions, f.id)), p)


def _events(ctx: MemoryContext, p: ReadPayload, space: str) -> Page[Event]:
    return _page(sorted(ctx.index(p.tenant, space).events.items(), key=lambda e: e.id), p)


def _profiles(ctx: MemoryContext, p: ReadPayload, space: str) -> Page[Profile]:
    return _page(sorted(ctx.index(p.tenant, space).profiles.items(), key=lambda r: r.id), p)


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
