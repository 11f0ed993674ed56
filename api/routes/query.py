"""Search and ask, answered by the query workers."""

from __future__ import annotations

from fastapi import APIRouter

from api.deps import ServicesDep, Tenant
from api.errors import COMMON, declared
from common.models.api import QueryBody
from common.models.query import AskResponse, SearchResponse

router = APIRouter(
    prefix="/v1/spaces/{space}", tags=["query"], responses=declared(*COMMON, 404, 504)
)


@router.post("/search")
def search(space: str, body: QueryBody, svc: ServicesDep, tenant: Tenant) -> SearchResponse:
    """Ranked facts (text, source turn ids, each stage's score), events and profiles used;
    with `explain`, the recall graph: seeds, expanded facts and the edges by channel."""
    found = svc.client.search(
        tenant, space, body.question, k=body.k, mode=body.mode, explain=body.explain,
        timeout=svc.settings.api.query_timeout_s,
    )  # fmt: skip
    return SearchResponse.model_validate(found)


@router.post("/ask")
def ask(space: str, body: QueryBody, svc: ServicesDep, tenant: Tenant) -> AskResponse:
    """An answer from memory with the facts it used."""
    answered = svc.client.ask(
        tenant, space, body.question, k=body.k, mode=body.mode, explain=body.explain,
        timeout=svc.settings.api.query_timeout_s,
    )  # fmt: skip
    return AskResponse.model_validate(answered)
