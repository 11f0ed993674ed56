"""Spaces: create, list, show, and erase with everything in them."""

from __future__ import annotations

from fastapi import APIRouter, status

from api.deps import ServicesDep, Tenant, WritingTenant
from api.errors import COMMON, declared
from common.models.api import SpaceCreate
from common.models.responses import ErasureReceipt, Space, SpaceList

router = APIRouter(prefix="/v1/spaces", tags=["spaces"], responses=declared(*COMMON))


@router.post("", status_code=status.HTTP_201_CREATED, responses=declared(409, 429, 504))
def create_space(body: SpaceCreate, svc: ServicesDep, tenant: WritingTenant) -> Space:
    """A new, empty space (409 if the name is taken)."""
    created = svc.client.admin(
        tenant, body.name, "create_space", timeout=svc.settings.api.admin_timeout_s
    )
    return Space.model_validate(created)


@router.get("", responses=declared(504))
def list_spaces(svc: ServicesDep, tenant: Tenant) -> SpaceList:
    """The tenant's spaces with their counts."""
    spaces = svc.client.read(tenant, "spaces", timeout=svc.settings.api.query_timeout_s)
    return SpaceList.model_validate(spaces)


@router.get("/{space}", responses=declared(404, 504))
def get_space(space: str, svc: ServicesDep, tenant: Tenant) -> Space:
    found = svc.client.read(tenant, "space", space, timeout=svc.settings.api.query_timeout_s)
    return Space.model_validate(found)


@router.delete("/{space}", responses=declared(404, 409, 429, 504))
def delete_space(space: str, svc: ServicesDep, tenant: WritingTenant) -> ErasureReceipt:
    """Erase the space from every store: facts, events, profiles, raw sessions, jobs and
    queue state; returns what was removed. Sessions still being ingested are cancelled; 409
    while a session's memory is being written."""
    erased = svc.client.admin(
        tenant, space, "erase_space", timeout=svc.settings.api.admin_timeout_s
    )
    return ErasureReceipt.model_validate(erased)
