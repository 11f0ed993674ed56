"""Search and ask, answered by the query workers."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from api.deps import ServicesDep, Tenant
from common.models.api import QueryBody

router = APIRouter(prefix="/v1/spaces/{space}", tags=["query"])


@router.post("/search")
def search(space: str, body: QueryBody, svc: ServicesDep, tenant: Tenant) -> dict[str, Any]:
    """Ranked facts (text, source turn ids, each stage's score), events and profiles used."""
    return svc.client.search(
        tenant, space, body.question, k=body.k, mode=body.mode,
        timeout=svc.settings.api.query_timeout_s,
    )  # fmt: skip


@router.post("/ask")
def ask(space: str, body: QueryBody, svc: ServicesDep, tenant: Tenant) -> dict[str, Any]:
    """An answer from memory with the facts it used."""
    return svc.client.ask(
        tenant, space, body.question, k=body.k, mode=body.mode,
        timeout=svc.settings.api.query_timeout_s,
    )  # fmt: skip
