"""Search and ask, answered by the query workers (each waits on the waiting pool,
`api.capacity`)."""

from __future__ import annotations

from fastapi import APIRouter

from api.deps import ServicesDep, TenantMemoryDep
from api.errors import COMMON, declared
from common.models.api import ContextBody, QueryBody
from common.models.query import AskResponse, ContextResponse, SearchResponse

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
        lambda: memory.search(space, body.question, explain=body.explain, **body.recall())
    )


@router.post("/ask")
async def ask(
    space: str, body: QueryBody, memory: TenantMemoryDep, svc: ServicesDep
) -> AskResponse:
    """An answer from memory with the facts it used."""
    return await svc.waiting(
        lambda: memory.ask(space, body.question, explain=body.explain, **body.recall())
    )


@router.post("/context")
async def context(
    space: str, body: ContextBody, memory: TenantMemoryDep, svc: ServicesDep
) -> ContextResponse:
    """A block to place in a prompt as it is (`text`): the profiles in force at `as_of`
    (default now), the facts most relevant to the question with their dates and sessions,
    the summaries of the events recall used and the turns not yet processed, each line
    labelled (`[P1]`, `[F1]`, `[E1]`, `[T1]`) with what it cites in `items`, within
    `max_tokens` (counted as characters / 4); `left_out` counts the lines that did not fit."""
    return await svc.waiting(
        lambda: memory.context(space, body.question, body.max_tokens, **body.recall())
    )
