"""The review of the Fact Executor's teacher samples (stage 2 of its SFT): samples with their
latest decision, a reviewer's decision on one, and the review's counts.

The samples file (`executor.samples_path`) and its decision log are local files beside the
API process, as `atommem serve` runs it: a review tool for one machine, read and appended
here rather than through the workers, which own only the store. Each tenant sees the
samples it taught.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Literal

from fastapi import APIRouter, Query, status
from pydantic import BaseModel, Field

from api.deps import ServicesDep, Tenant
from api.errors import COMMON, declared
from common.errors import NotFound
from common.executor import review
from common.executor.review import Decision, Summary, Verdict
from common.executor.samples import Provenance, Sample, read_samples
from common.models.session import Turn

router = APIRouter(prefix="/v1/executor", tags=["executor"], responses=declared(*COMMON))


class SampleView(BaseModel):
    """A sample as a reviewer reads it (the prompt's instruction left out: it is the same for
    every sample of a prompt version)."""

    index: int = Field(description="the sample's place among the tenant's samples")
    id: str
    conversation: str
    session_id: str
    started_at: datetime
    participants: list[str]
    context: list[Turn]
    turns: list[Turn]
    facts: list[str] = Field(description="the teacher's facts")
    provenance: Provenance
    decision: Decision | None = Field(description="the latest decision, if any")


class SamplePage(BaseModel):
    total: int = Field(description="samples matching the filter")
    items: list[SampleView]
    summary: Summary


def _samples(path: Path, tenant: str) -> list[Sample]:
    return [s for s in read_samples(path) if s.tenant == tenant]


def _view(index: int, sample: Sample, decision: Decision | None) -> SampleView:
    w = sample.window
    return SampleView(
        index=index,
        id=sample.id,
        conversation=sample.conversation,
        session_id=w.session_id,
        started_at=w.started_at,
        participants=w.participants,
        context=w.context,
        turns=w.turns,
        facts=sample.facts,
        provenance=sample.provenance,
        decision=decision,
    )


@router.get("/samples")
def list_samples(
    svc: ServicesDep,
    tenant: Tenant,
    offset: int = Query(default=0, ge=0),
    limit: int = Query(default=50, ge=1, le=500),
    state: Literal["all", "unreviewed", "reviewed"] = "all",
) -> SamplePage:
    """The tenant's samples in the order taught, from `offset` among those in `state`, each
    with its latest decision, and the review's counts."""
    path = svc.settings.executor.samples_path
    samples = _samples(path, tenant)
    last, logged = review.latest(path)
    views = [_view(i, s, last.get(s.id)) for i, s in enumerate(samples)]
    if state != "all":
        views = [v for v in views if (v.decision is None) == (state == "unreviewed")]
    return SamplePage(
        total=len(views),
        items=views[offset : offset + limit],
        summary=review.summarize(samples, last, logged),
    )


@router.get("/summary")
def review_summary(svc: ServicesDep, tenant: Tenant) -> Summary:
    """How many samples are reviewed and excluded, and the decisions per fact."""
    path = svc.settings.executor.samples_path
    last, logged = review.latest(path)
    return review.summarize(_samples(path, tenant), last, logged)


@router.post(
    "/samples/{sample_id}/decisions",
    status_code=status.HTTP_201_CREATED,
    responses=declared(404),
)
def decide(sample_id: str, verdict: Verdict, svc: ServicesDep, tenant: Tenant) -> Decision:
    """Log a reviewer's decision on a sample: per teacher fact accept, edit, drop or split
    (422 when it does not fit the sample); it supersedes earlier ones, which stay logged."""
    path = svc.settings.executor.samples_path
    found = next((s for s in _samples(path, tenant) if s.id == sample_id), None)
    if found is None:
        raise NotFound(f"no sample {sample_id} for this key")
    decision = review.decide(found, verdict)
    review.record(path, decision)
    return decision
