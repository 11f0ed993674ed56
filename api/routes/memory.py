"""Stored memory: facts, events and profiles, with history and provenance; fact erasure and
correction."""

from __future__ import annotations

from datetime import date
from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import Field

from api.deps import ServicesDep, TenantMemoryDep
from api.errors import COMMON, declared
from common.errors import InvalidInput
from common.models.api import FactCorrection, ListingFilter
from common.models.memory import Event, Fact, Profile
from common.models.responses import CorrectionReceipt, ErasureReceipt, FactHistory, Page
from common.models.session import NAME_MAX
from common.service import profiles_of

router = APIRouter(
    prefix="/v1/spaces/{space}", tags=["memory"], responses=declared(*COMMON, 404, 504)
)

Limit = Annotated[int, Query(ge=1, le=1000)]


def _day(text: str) -> date:
    try:
        if len(text) != len("YYYY-MM-DD"):
            raise ValueError(text)
        return date.fromisoformat(text)
    except ValueError:
        raise InvalidInput(f"as_of: {text!r} is no day of the calendar") from None


Offset = Annotated[int, Query(ge=0, le=10_000_000)]
Text = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=200,
        description="only items whose text holds every word of this (case ignored)",
    ),
]
Ids = Annotated[
    list[Annotated[str, Field(min_length=1, max_length=256)]] | None,
    Query(alias="id", max_length=200, description="only these items (repeat the parameter)"),
]
SessionIds = Annotated[
    list[Annotated[str, Field(min_length=1, max_length=256)]] | None,
    Query(
        alias="session_id",
        max_length=100,
        description="only facts these sessions produced, updated or repeated",
    ),
]
EventIds = Annotated[
    list[Annotated[str, Field(min_length=1, max_length=256)]] | None,
    Query(alias="event_id", max_length=100, description="only facts of these events"),
]


def _narrow(
    text: str | None,
    ids: list[str] | None,
    sessions: list[str] | None = None,
    events: list[str] | None = None,
) -> ListingFilter | None:
    narrow = ListingFilter(
        text=text, ids=ids or None, session_ids=sessions or None, event_ids=events or None
    )
    return None if narrow.empty else narrow


@router.get("/facts")
async def list_facts(
    space: str,
    memory: TenantMemoryDep,
    svc: ServicesDep,
    limit: Limit = 100,
    offset: Offset = 0,
    text: Text = None,
    sessions: SessionIds = None,
    events: EventIds = None,
    ids: Ids = None,
) -> Page[Fact]:
    """Facts in session order, a page at a time (`total` counts those the filters let
    through): by words of their text, the sessions they came from, their events, or ids."""
    narrow = _narrow(text, ids, sessions, events)
    return await svc.waiting(lambda: memory.page(space, "facts", limit, offset, narrow))


@router.get("/facts/{fact_id}")
async def get_fact(space: str, fact_id: str, memory: TenantMemoryDep, svc: ServicesDep) -> Fact:
    """A fact with its source turns (`source`, `also_from`) and earlier versions (`history`)."""
    return await svc.waiting(lambda: memory.get(space, fact_id, "facts"))


@router.get("/facts/{fact_id}/history")
async def fact_history(
    space: str, fact_id: str, memory: TenantMemoryDep, svc: ServicesDep
) -> FactHistory:
    """How the fact came to read as it does: each earlier text, and which session replaced it."""
    return await svc.waiting(lambda: memory.history(space, fact_id))


@router.delete("/facts/{fact_id}", responses=declared(409, 429))
async def delete_fact(
    space: str, fact_id: str, memory: TenantMemoryDep, svc: ServicesDep
) -> ErasureReceipt:
    """Erase a fact and rewrite what was built from it (events, profiles)."""
    return await svc.waiting(lambda: memory.delete(space, fact_id=fact_id))


@router.patch("/facts/{fact_id}", responses=declared(409, 429))
async def correct_fact(
    space: str, fact_id: str, body: FactCorrection, memory: TenantMemoryDep, svc: ServicesDep
) -> CorrectionReceipt:
    """Correct a fact's text. It is verified against the space's other facts (409 when
    another already says it), re-embedded, its old text kept in its history marked as a
    correction, its provenance kept, and its events and profiles rebuilt; the same
    correction again changes nothing (`changed` false)."""
    return await svc.waiting(lambda: memory.correct_fact(space, fact_id, body.text, body.reason))


@router.get("/events")
async def list_events(
    space: str,
    memory: TenantMemoryDep,
    svc: ServicesDep,
    limit: Limit = 100,
    offset: Offset = 0,
    text: Text = None,
    ids: Ids = None,
) -> Page[Event]:
    """Events in time order (by the first day of their span, undated ones last), a page at a
    time; `text` looks in the summary and keywords."""
    narrow = _narrow(text, ids)
    return await svc.waiting(lambda: memory.page(space, "events", limit, offset, narrow))


@router.get("/events/{event_id}")
async def get_event(space: str, event_id: str, memory: TenantMemoryDep, svc: ServicesDep) -> Event:
    return await svc.waiting(lambda: memory.get(space, event_id, "events"))


@router.get("/profiles")
async def list_profiles(
    space: str,
    memory: TenantMemoryDep,
    svc: ServicesDep,
    limit: Limit = 100,
    offset: Offset = 0,
    person: Annotated[
        str | None,
        Query(min_length=1, max_length=NAME_MAX, description="only this person's profiles"),
    ] = None,
    as_of: Annotated[
        str | None,
        Query(
            json_schema_extra={"format": "date"},
            description="a day (YYYY-MM-DD): each profile as it stood then (the version in "
            "force as its content, the earlier ones as its history); those not yet holding "
            "left out",
        ),
    ] = None,
    text: Text = None,
    ids: Ids = None,
) -> Page[Profile]:
    """Profiles a page at a time; with `person` and `as_of`, what was true of someone on a
    day ("where did she live in April?"), ordered by person and start. `text` looks in the
    person, keywords and the content of every version."""
    narrow = _narrow(text, ids)
    if person is None and as_of is None:
        return await svc.waiting(lambda: memory.page(space, "profiles", limit, offset, narrow))
    day = None if as_of is None else _day(as_of)
    found = await svc.waiting(lambda: profiles_of(memory, space, person, day, narrow))
    return Page(total=len(found), offset=offset, items=found[offset : offset + limit])


@router.get("/profiles/{profile_id}")
async def get_profile(
    space: str, profile_id: str, memory: TenantMemoryDep, svc: ServicesDep
) -> Profile:
    """A profile's current state and its earlier versions with their validity intervals."""
    return await svc.waiting(lambda: memory.get(space, profile_id, "profiles"))
