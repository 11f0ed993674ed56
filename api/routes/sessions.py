"""Sessions in (202 and a job), stored sessions, job state, and erasing a session's
contribution."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, status

from api.deps import ServicesDep, TenantMemoryDep
from api.errors import COMMON, declared
from common.models.api import SPACE_NAME, SessionBody
from common.models.jobs import Job, JobState
from common.models.messages import MessagesBody
from common.models.responses import ErasureReceipt, JobList, Page, SessionSummary, StoredSession

router = APIRouter(tags=["sessions"], responses=declared(*COMMON))
WRITE = declared(404, 409, 429, 504)
READ = declared(404, 504)
Limit = Annotated[int, Query(ge=1, le=1000)]
Offset = Annotated[int, Query(ge=0, le=10_000_000)]


@router.post("/v1/spaces/{space}/sessions", status_code=status.HTTP_202_ACCEPTED, responses=WRITE)
async def submit_session(
    space: str, body: SessionBody, memory: TenantMemoryDep, svc: ServicesDep
) -> Job:
    """Queue a finished session for ingest; poll `GET /v1/jobs/{job_id}` for its state.
    Submitting the same session again is the same job (and changes nothing); the same id
    with other content is a 409. (The space's check waits on a query worker.)"""
    return await svc.waiting(lambda: memory.add(space, body))


@router.post("/v1/spaces/{space}/messages", status_code=status.HTTP_202_ACCEPTED, responses=WRITE)
async def submit_messages(
    space: str, body: MessagesBody, memory: TenantMemoryDep, svc: ServicesDep
) -> JobList:
    """Queue a chat's plain messages (`[{role, content, name?, created_at?}]`, as a chat
    backend holds them): `user` and `assistant` messages become the turns of one session, or
    of several where the chat paused longer than `api.message_gap_s`; a job each, in order.
    Sending the same messages again is the same jobs."""
    return JobList(
        items=await svc.waiting(
            lambda: memory.add_messages(
                space, body.messages, body.conversation_id, body.user, body.assistant
            )
        )
    )


@router.get("/v1/spaces/{space}/sessions", responses=READ)
async def list_sessions(
    space: str, memory: TenantMemoryDep, svc: ServicesDep, limit: Limit = 100, offset: Offset = 0
) -> Page[SessionSummary]:
    """Stored sessions in session order, a page at a time, with their commit state and
    what each added."""
    return await svc.waiting(lambda: memory.session_page(space, limit, offset))


@router.get("/v1/spaces/{space}/sessions/{session_id}", responses=READ)
async def get_session(
    space: str, session_id: str, memory: TenantMemoryDep, svc: ServicesDep
) -> StoredSession:
    """A stored session with its turns, as submitted."""
    return await svc.waiting(lambda: memory.session(space, session_id))


@router.get("/v1/jobs")
def list_jobs(
    memory: TenantMemoryDep,
    space: Annotated[
        str | None, Query(pattern=SPACE_NAME, description="only this space's jobs")
    ] = None,
    state: Annotated[JobState | None, Query(description="only jobs in this state")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[
        int, Query(ge=0, le=100_000, description="skip this many of the newest (matching) jobs")
    ] = 0,
) -> JobList:
    """The tenant's newest jobs, newest first, with their state, reason and counts (a job is
    kept for `pipeline.job_ttl_s`); `space` and `state` look past the newest `limit` jobs."""
    return JobList(items=memory.jobs(space, limit, state, offset))


@router.get("/v1/jobs/{job_id}", responses=declared(404))
def get_job(job_id: str, memory: TenantMemoryDep) -> Job:
    """A job's state (`queued → extracting → committing → profiling → done`, or `failed`
    with the reason) and its counts, model calls and tokens included."""
    return memory.job(job_id)


@router.delete("/v1/spaces/{space}/sessions/{session_id}", responses=WRITE)
async def delete_session(
    space: str, session_id: str, memory: TenantMemoryDep, svc: ServicesDep
) -> ErasureReceipt:
    """Erase a session: its raw record and job, the facts only it supports, its updates to
    other facts (they get back their earlier state), and what was built from them. A session
    still being ingested is cancelled (its job fails as erased); 409 while its memory is
    being written."""
    return await svc.waiting(lambda: memory.delete(space, session_id=session_id))
