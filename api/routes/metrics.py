"""Counters of the model endpoints, as the workers keep them (in Redis, or in this process
when it serves the embedded store; read only here): an operator's view, on the admin key
(they name the endpoints every tenant shares)."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel, Field

from api.deps import Admin, ServicesDep
from api.errors import COMMON, declared

router = APIRouter(prefix="/v1/metrics", tags=["metrics"], responses=declared(*COMMON))


class EndpointCounters(BaseModel):
    """One endpoint's counters since Redis last lost them (they are never reset otherwise)."""

    endpoint: str = Field(description="`model@base_url`: one budget, shared by every role on it")
    calls: int = Field(description="HTTP calls made, failed ones included")
    tokens: int = Field(description="prompt and completion tokens the server reported")
    throttled: int = Field(description="answers with HTTP 429")
    waits: int = Field(description="calls that waited inside a task for the budget")
    wait_ms: int = Field(description="milliseconds those calls waited")
    requeues: int = Field(description="tasks sent back to their queue to wait for the budget")


class ModelMetrics(BaseModel):
    endpoints: list[EndpointCounters]


@router.get("/models")
def model_metrics(svc: ServicesDep, _: Admin) -> ModelMetrics:
    """Per model endpoint, what every worker's calls to it cost and how often its budget or
    its server made them wait (admin key only: endpoints serve every tenant, and their
    addresses are the deployment's; a tenant reads its own in each job's counts,
    `llm.endpoint.<role>.*`)."""
    found = svc.model_counters()
    return ModelMetrics(
        endpoints=[EndpointCounters(endpoint=e, **counts) for e, counts in found.items()]
    )
