"""Search and ask, answered by the query workers (each waits on the waiting pool,
`api.capacity`)."""

from __future__ import annotations

from fastapi import APIRouter

from api.deps import ServicesDep, TenantMemoryDep
from api.errors import COMMON, declared
from common.models.api import QueryBody
from common.models.query import AskResponse, SearchResponse

router = APIRouter(
    prefix="/v1/spaces/{space}", tags=["query"], responses=declared(*COMMON, 404, 504)
)


@router.post("/search")
async def search(
    space: str, body: QueryBody, memory: TenantMemoryDep, svc: ServicesDep
) -> SearchResponse:
    """Ranked facts (text, source turn ids, `relevance` in [0, 1], each stage's score), events
    and profiles used; with `explain`, the recall graph: seeds, expanded facts and the edges
    by channel. Hits with `relevance` below `min_score` (default `retrieval.min_relevance`)
    and outside `filters` (when said, session, participant) are left out."""
    return await svc.waiting(
        lambda: memory.search(
            space, body.question, body.k, body.mode, body.explain, body.min_score, body.filters
        )
    )


@router.post("/ask")
async def ask(
    space: str, body: QueryBody, memory: TenantMemoryDep, svc: ServicesDep
) -> AskResponse:
    """An answer from memory with the facts it used."""
    return await svc.waiting(
        lambda: memory.ask(
            space, body.question, body.k, body.mode, body.explain, body.min_score, body.filters
        )
    )
