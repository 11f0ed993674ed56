"""Spaces: create, list, show, and erase with everything in them."""

from __future__ import annotations

from fastapi import APIRouter, status

from api.deps import ServicesDep, TenantMemoryDep
from api.errors import COMMON, declared
from common.models.api import SpaceCreate
from common.models.responses import ErasureReceipt, Space, SpaceList

router = APIRouter(prefix="/v1/spaces", tags=["spaces"], responses=declared(*COMMON))


@router.post("", status_code=status.HTTP_201_CREATED, responses=declared(409, 429, 504))
async def create_space(body: SpaceCreate, memory: TenantMemoryDep, svc: ServicesDep) -> Space:
    """A new, empty space (409 if the name is taken)."""
    return await svc.waiting(lambda: memory.create_space(body.name))


@router.get("", responses=declared(504))
async def list_spaces(memory: TenantMemoryDep, svc: ServicesDep) -> SpaceList:
    """The tenant's spaces with their counts."""
    return SpaceList(items=await svc.waiting(memory.list_spaces))


@router.get("/{space}", responses=declared(404, 504))
async def get_space(space: str, memory: TenantMemoryDep, svc: ServicesDep) -> Space:
    return await svc.waiting(lambda: memory.get_space(space))


@router.delete("/{space}", responses=declared(404, 409, 429, 504))
async def delete_space(space: str, memory: TenantMemoryDep, svc: ServicesDep) -> ErasureReceipt:
    """Erase the space from every store: facts, events, profiles, raw sessions, jobs and
    queue state; returns what was removed. Sessions still being ingested are cancelled; 409
    while a session's memory is being written."""
    return await svc.waiting(lambda: memory.delete_space(space))
