"""Tenants and their API keys (admin key only)."""

from __future__ import annotations

from fastapi import APIRouter, Path, Response, status

from api.deps import Admin, ServicesDep
from api.errors import COMMON, declared
from common.models.api import SPACE_NAME, TENANT_NAME, SpaceRebuild, TenantCreate
from common.models.responses import JobList, KeyList, NewKey, Tenant, TenantList

router = APIRouter(prefix="/v1/admin/tenants", tags=["admin"], responses=declared(*COMMON))
TenantName = Path(pattern=TENANT_NAME)


@router.post("", status_code=status.HTTP_201_CREATED, responses=declared(409))
def create_tenant(body: TenantCreate, svc: ServicesDep, _: Admin) -> Tenant:
    return Tenant.model_validate(svc.keys.create_tenant(body.name))


@router.get("")
def list_tenants(svc: ServicesDep, _: Admin) -> TenantList:
    return TenantList.model_validate({"items": svc.keys.tenants()})


@router.post("/{tenant}/keys", status_code=status.HTTP_201_CREATED, responses=declared(404))
def create_key(svc: ServicesDep, _: Admin, tenant: str = TenantName) -> NewKey:
    """A new key for the tenant; `api_key` is shown this once and never stored."""
    return NewKey.model_validate(svc.keys.create_key(tenant))


@router.get("/{tenant}/keys", responses=declared(404))
def list_keys(svc: ServicesDep, _: Admin, tenant: str = TenantName) -> KeyList:
    return KeyList.model_validate({"items": svc.keys.list_keys(tenant)})


@router.delete(
    "/{tenant}/keys/{key_id}", status_code=status.HTTP_204_NO_CONTENT, responses=declared(404)
)
def revoke_key(key_id: str, svc: ServicesDep, _: Admin, tenant: str = TenantName) -> Response:
    svc.keys.revoke_key(tenant, key_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post(
    "/{tenant}/spaces/{space}/rebuild",
    status_code=status.HTTP_202_ACCEPTED,
    responses=declared(404, 409, 504),
)
async def rebuild_space(
    body: SpaceRebuild,
    svc: ServicesDep,
    _: Admin,
    tenant: str = TenantName,
    space: str = Path(pattern=SPACE_NAME),
) -> JobList:
    """Re-run every stored session of the tenant's space, in session order, through the
    workers' current configuration into `into` (created when missing), as ordinary jobs; the
    source keeps serving. An operator's call: it re-extracts the whole space. The same
    rebuild again is the same jobs (it resumes); a target holding other memory is a 409."""
    memory = svc.memory(tenant)

    def rebuild() -> JobList:
        svc.keys.require_tenant(tenant)
        return JobList(items=memory.rebuild(space, body.into))

    return await svc.waiting(rebuild)
