"""Stored memory: facts, events and profiles, with history and provenance; fact erasure."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from api.deps import TenantMemoryDep
from api.errors import COMMON, declared
from common.models.memory import Event, Fact, Profile
from common.models.responses import ErasureReceipt, FactHistory, Page

router = APIRouter(
    prefix="/v1/spaces/{space}", tags=["memory"], responses=declared(*COMMON, 404, 504)
)

Limit = Annotated[int, Query(ge=1, le=1000)]
Offset = Annotated[int, Query(ge=0, le=10_000_000)]


@router.get("/facts")
def list_facts(
    space: str, memory: TenantMemoryDep, limit: Limit = 100, offset: Offset = 0
) -> Page[Fact]:
    """Facts in session order, a page at a time (`total` counts them all)."""
    return memory.page(space, "facts", limit, offset)


@router.get("/facts/{fact_id}")
def get_fact(space: str, fact_id: str, memory: TenantMemoryDep) -> Fact:
    """A fact with its source turns (`source`, `also_from`) and earlier versions (`history`)."""
    return memory.get(space, fact_id, "facts")


@router.get("/facts/{fact_id}/history")
def fact_history(space: str, fact_id: str, memory: TenantMemoryDep) -> FactHistory:
    """How the fact came to read as it does: each earlier text, and which session replaced it."""
    return memory.history(space, fact_id)


@router.delete("/facts/{fact_id}", responses=declared(409, 429))
def delete_fact(space: str, fact_id: str, memory: TenantMemoryDep) -> ErasureReceipt:
    """Erase a fact and rewrite what was built from it (events, profiles)."""
    return memory.delete(space, fact_id=fact_id)


@router.get("/events")
def list_events(
    space: str, memory: TenantMemoryDep, limit: Limit = 100, offset: Offset = 0
) -> Page[Event]:
    return memory.page(space, "events", limit, offset)


@router.get("/events/{event_id}")
def get_event(space: str, event_id: str, memory: TenantMemoryDep) -> Event:
    return memory.get(space, event_id, "events")


@router.get("/profiles")
def list_profiles(
    space: str, memory: TenantMemoryDep, limit: Limit = 100, offset: Offset = 0
) -> Page[Profile]:
    return memory.page(space, "profiles", limit, offset)


@router.get("/profiles/{profile_id}")
def get_profile(space: str, profile_id: str, memory: TenantMemoryDep) -> Profile:
    """A profile's current state and its earlier versions with their validity intervals."""
    return memory.get(space, profile_id, "profiles")
