"""Sessions in (202 and a job), stored sessions, job state, and erasing a session's
contribution."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, status

from api.deps import ServicesDep, Tenant, WritingTenant
from api.errors import COMMON, declared
from common.models.api import SPACE_NAME, SessionBody
from common.models.jobs import Job
from common.models.responses import ErasureReceipt, JobList, Page, SessionSummary, StoredSession

router = APIRouter(tags=["sessions"], responses=declared(*COMMON))
WRITE = declared(404, 409, 429, 504)
READ = declared(404, 504)
Limit = Annotated[int, Query(ge=1, le=1000)]
Offset = Annotated[int, Query(ge=0, le=10_000_000)]


@router.post("/v1/spaces/{space}/sessions", status_code=status.HTTP_202_ACCEPTED, responses=WRITE)
def submit_session(space: str, body: SessionBody, svc: ServicesDep, tenant: WritingTenant) -> Job:
    """Queue a finished session for ingest; poll `GET /v1/jobs/{job_id}` for its state.
    Submitting the same session again is the same job (and changes nothing); the same id
    with other content is a 409."""
    limits = svc.settings.api
    body.check_limits(limits.max_turns, limits.max_text_chars)
    session = body.to_session()
    svc.client.read(tenant, "space", space, timeout=limits.query_timeout_s)  # 404 if unknown
    (job,) = svc.client.submit(tenant, space, [session])
    return job


@router.get("/v1/spaces/{space}/sessions", responses=READ)
def list_sessions(
    space: str, svc: ServicesDep, tenant: Tenant, limit: Limit = 100, offset: Offset = 0
) -> Page[SessionSummary]:
    """Stored sessions in session order, a page at a time, with their commit state and
    what each added."""
    found = svc.client.read(
        tenant, "sessions", space, limit=limit, offset=offset,
        timeout=svc.settings.api.query_timeout_s,
    )  # fmt: skip
    return Page[SessionSummary].model_validate(found)


@router.get("/v1/spaces/{space}/sessions/{session_id}", responses=READ)
def get_session(space: str, session_id: str, svc: ServicesDep, tenant: Tenant) -> StoredSession:
    """A stored session with its turns, as submitted."""
    found = svc.client.read(
        tenant, "session", space, item_id=session_id, timeout=svc.settings.api.query_timeout_s
    )
    return StoredSession.model_validate(found)


@router.get("/v1/jobs")
def list_jobs(
    svc: ServicesDep,
    tenant: Tenant,
    space: Annotated[
        str | None, Query(pattern=SPACE_NAME, description="only this space's jobs")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> JobList:
    """The tenant's newest jobs, newest first, with their state, reason and counts (a job is
    kept for `pipeline.job_ttl_s`)."""
    return JobList(items=svc.client.recent_jobs(tenant, space, limit))


@router.get("/v1/jobs/{job_id}", responses=declared(404))
def get_job(job_id: str, svc: ServicesDep, tenant: Tenant) -> Job:
    """A job's state (`queued → extracting → committing → profiling → done`, or `failed`
    with the reason) and its counts, model calls and tokens included."""
    return svc.client.job(tenant, job_id)


@router.delete("/v1/spaces/{space}/sessions/{session_id}", responses=WRITE)
def delete_session(
    space: str, session_id: str, svc: ServicesDep, tenant: WritingTenant
) -> ErasureReceipt:
    """Erase a session: its raw record and job, the facts only it supports, its updates to
    other facts (they get back their earlier state), and what was built from them. A session
    still being ingested is cancelled (its job fails as erased); 409 while its memory is
    being written."""
    erased = svc.client.admin(
        tenant, space, "erase_session", session_id, timeout=svc.settings.api.admin_timeout_s
    )
    return ErasureReceipt.model_validate(erased)
