"""Sessions in (202 and a job), job state, and erasing a session's contribution."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, status

from api.deps import ServicesDep, Tenant, WritingTenant
from api.errors import COMMON, declared
from common.models.api import SessionBody
from common.models.jobs import Job
from common.models.responses import ErasureReceipt

router = APIRouter(tags=["sessions"], responses=declared(*COMMON))
WRITE = declared(404, 409, 429, 504)


@router.post("/v1/spaces/{space}/sessions", status_code=status.HTTP_202_ACCEPTED, responses=WRITE)
def submit_session(space: str, body: SessionBody, svc: ServicesDep, tenant: WritingTenant) -> Job:
    """Queue a finished session for ingest; poll `GET /v1/jobs/{job_id}` for its state.
    Submitting the same session again is the same job (and changes nothing); the same id
    with other content is a 409."""
    limits = svc.settings.api
    if len(body.turns) > limits.max_turns:
        raise HTTPException(422, f"{len(body.turns)} turns: at most {limits.max_turns} per session")
    longest = max(len(t.text) for t in body.turns)
    if longest > limits.max_text_chars:
        raise HTTPException(
            422, f"a turn has {longest} characters: at most {limits.max_text_chars}"
        )
    session = body.to_session()
    svc.client.read(tenant, "space", space, timeout=limits.query_timeout_s)  # 404 if unknown
    (job,) = svc.client.submit(tenant, space, [session])
    return job


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
    other facts (they get back their earlier state), and what was built from them."""
    erased = svc.client.admin(
        tenant, space, "erase_session", session_id, timeout=svc.settings.api.admin_timeout_s
    )
    return ErasureReceipt.model_validate(erased)
