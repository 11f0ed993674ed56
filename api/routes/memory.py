"""Stored memory: facts, events and profiles, with history and provenance; fact erasure."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query

from api.deps import ServicesDep, Tenant, WritingTenant
from api.errors import COMMON, declared
from common.models.jobs import ReadWhat
from common.models.memory import Event, Fact, Profile
from common.models.responses import ErasureReceipt, FactHistory, Page

router = APIRouter(
    prefix="/v1/spaces/{space}", tags=["memory"], responses=declared(*COMMON, 404, 504)
)

Limit = Annotated[int, Query(ge=1, le=1000)]
Offset = Annotated[int, Query(ge=0, le=10_000_000)]
Kind = Literal["facts", "events", "profiles"]


def _page(
    svc: ServicesDep, tenant: str, space: str, what: Kind, limit: int, offset: int
) -> dict[str, Any]:
    return svc.client.read(
        tenant, what, space, limit=limit, offset=offset, timeout=svc.settings.api.query_timeout_s
    )


def _one(svc: ServicesDep, tenant: str, space: str, what: ReadWhat, item_id: str) -> dict[str, Any]:
    return svc.client.read(
        tenant, what, space, item_id=item_id, timeout=svc.settings.api.query_timeout_s
    )


@router.get("/facts")
def list_facts(
    space: str, svc: ServicesDep, tenant: Tenant, limit: Limit = 100, offset: Offset = 0
) -> Page[Fact]:
    """Facts in session order, a page at a time (`total` counts them all)."""
    return Page[Fact].model_validate(_page(svc, tenant, space, "facts", limit, offset))


@router.get("/facts/{fact_id}")
def get_fact(space: str, fact_id: str, svc: ServicesDep, tenant: Tenant) -> Fact:
    """A fact with its source turns (`source`, `also_from`) and earlier versions (`history`)."""
    return Fact.model_validate(_one(svc, tenant, space, "fact", fact_id))


@router.get("/facts/{fact_id}/history")
def fact_history(space: str, fact_id: str, svc: ServicesDep, tenant: Tenant) -> FactHistory:
    """How the fact came to read as it does: each earlier text, and which session replaced it."""
    return FactHistory.of(Fact.model_validate(_one(svc, tenant, space, "fact", fact_id)))


@router.delete("/facts/{fact_id}", responses=declared(409, 429))
def delete_fact(
    space: str, fact_id: str, svc: ServicesDep, tenant: WritingTenant
) -> ErasureReceipt:
    """Erase a fact and rewrite what was built from it (events, profiles)."""
    erased = svc.client.admin(
        tenant, space, "erase_fact", fact_id, timeout=svc.settings.api.admin_timeout_s
    )
    return ErasureReceipt.model_validate(erased)


@router.get("/events")
def list_events(
    space: str, svc: ServicesDep, tenant: Tenant, limit: Limit = 100, offset: Offset = 0
) -> Page[Event]:
    return Page[Event].model_validate(_page(svc, tenant, space, "events", limit, offset))


@router.get("/events/{event_id}")
def get_event(space: str, event_id: str, svc: ServicesDep, tenant: Tenant) -> Event:
    return Event.model_validate(_one(svc, tenant, space, "event", event_id))


@router.get("/profiles")
def list_profiles(
    space: str, svc: ServicesDep, tenant: Tenant, limit: Limit = 100, offset: Offset = 0
) -> Page[Profile]:
    return Page[Profile].model_validate(_page(svc, tenant, space, "profiles", limit, offset))


@router.get("/profiles/{profile_id}")
def get_profile(space: str, profile_id: str, svc: ServicesDep, tenant: Tenant) -> Profile:
    """A profile's current state and its earlier versions with their validity intervals."""
    return Profile.model_validate(_one(svc, tenant, space, "profile", profile_id))
