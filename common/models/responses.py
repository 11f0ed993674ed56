"""What the HTTP API returns, beyond jobs, records and query results: pages, spaces,
erasure receipts, fact history, tenants and keys, health, and the one error body. The SDK
reads them back."""

from __future__ import annotations

from datetime import datetime
from typing import Generic, Literal, TypeVar

from pydantic import BaseModel, Field, field_serializer

from common.models.memory import FactRevision, FactSource

T = TypeVar("T")


class ErrorBody(BaseModel):
    """Every 4xx and 5xx of the API: what is wrong, in words (a 422 names the field)."""

    detail: str


class Page(BaseModel, Generic[T]):
    """A slice of a space's facts, events or profiles; `total` counts them all."""

    total: int
    offset: int
    items: list[T]


class FactHistory(BaseModel):
    """How a fact came to read as it does."""

    fact_id: str
    current: str
    history: list[FactRevision]
    provenance: list[FactSource] = Field(description="`source`, then each of `also_from`")


class Erased(BaseModel):
    """What an erasure removed or rewrote, by id (the worker's `ErasureReport`)."""

    facts_deleted: list[str]
    facts_rewritten: list[str]
    events_deleted: list[str]
    events_rewritten: list[str]
    profiles_deleted: list[str]
    profiles_rewritten: list[str]
    sessions_deleted: list[str]


class ErasureReceipt(BaseModel):
    erased: Erased


class SpaceCounts(BaseModel):
    sessions: int
    facts: int
    events: int
    profiles: int


class Space(BaseModel):
    name: str
    created_at: datetime = Field(json_schema_extra={"format": "date-time"})
    participants: list[str]
    counts: SpaceCounts

    @field_serializer("created_at", when_used="json")
    def _as_stored(self, value: datetime) -> str:
        # The worker sends `isoformat()` ("+00:00"); pydantic would write "Z" instead.
        return value.isoformat()


class SpaceList(BaseModel):
    items: list[Space]


class Tenant(BaseModel):
    name: str
    created_at: float


class TenantList(BaseModel):
    items: list[Tenant]


class NewKey(BaseModel):
    """A tenant's new key: `api_key` is shown this once and never stored."""

    tenant: str
    key_id: str
    created_at: float
    api_key: str


class KeyInfo(BaseModel):
    key_id: str
    created_at: float | None


class KeyList(BaseModel):
    items: list[KeyInfo]


class Health(BaseModel):
    status: Literal["ok"]


class Readiness(BaseModel):
    """Each check, and why it failed; a check not reached is left out (`worker` and `store`
    are reached only with `/readyz?deep=true`)."""

    status: Literal["ready", "not ready"]
    redis: bool
    worker: bool | None = None
    store: bool | None = None
    redis_error: str | None = None
    worker_error: str | None = None
    store_error: str | None = None
