"""Spaces: create, list, show, and erase with everything in them."""

from __future__ import annotations

from fastapi import APIRouter, status

from api.deps import TenantMemoryDep
from api.errors import COMMON, declared
from common.models.api import SpaceCreate
from common.models.responses import ErasureReceipt, Space, SpaceList

router = APIRouter(prefix="/v1/spaces", tags=["spaces"], responses=declared(*COMMON))


@router.post("", status_code=status.HTTP_201_CREATED, responses=declared(409, 429, 504))
def create_space(body: SpaceCreate, memory: TenantMemoryDep) -> Space:
    """A new, empty space (409 if the name is taken)."""
    return memory.create_space(body.name)


@router.get("", responses=declared(504))
def list_spaces(memory: TenantMemoryDep) -> SpaceList:
    """The tenant's spaces with their counts."""
    return SpaceList(items=memory.list_spaces())


@router.get("/{space}", responses=declared(404, 504))
def get_space(space: str, memory: TenantMemoryDep) -> Space:
    return memory.get_space(space)


@router.delete("/{space}", responses=declared(404, 409, 429, 504))
def delete_space(space: str, memory: TenantMemoryDep) -> ErasureReceipt:
    """Erase the space from every store: facts, events, profiles, raw sessions, jobs and
    queue state; returns what was removed. Sessions still being ingested are cancelled; 409
    while a session's memory is being written."""
    return memory.delete_space(space)
