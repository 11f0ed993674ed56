"""What the HTTP API returns, beyond jobs, records and query results: pages, spaces,
erasure and correction receipts, fact history, tenants and keys, health, and the one error
body. The SDK reads them back."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer, field_serializer

from common.models.jobs import Job
from common.models.memory import SAID_AT, Event, Fact, FactRevision, FactSource, Profile
from common.models.session import SessionRecord, SessionStatus, Turn

T = TypeVar("T")


class ErrorBody(BaseModel):
    """Every 4xx and 5xx of the API: what is wrong, in words (a 422 names the field)."""

    detail: str


class Page(BaseModel, Generic[T]):
    """A slice of a space's facts, events or profiles; `total` counts them all."""

    total: int
    offset: int
    items: list[T]


# The records a space lists, by the name of their listing (`/v1/spaces/{space}/facts`, …).
Kind = Literal["facts", "events", "profiles"]
RECORDS: dict[Kind, type[Fact] | type[Event] | type[Profile]] = {
    "facts": Fact,
    "events": Event,
    "profiles": Profile,
}
PAGES: dict[Kind, type[Page[Any]]] = {
    "facts": Page[Fact],
    "events": Page[Event],
    "profiles": Page[Profile],
}


class FactHistory(BaseModel):
    """How a fact came to read as it does."""

    fact_id: str
    current: str
    history: list[FactRevision]
    provenance: list[FactSource] = Field(description="`source`, then each of `also_from`")

    @classmethod
    def of(cls, fact: Fact) -> FactHistory:
        return cls(
            fact_id=fact.id,
            current=fact.text,
            history=fact.history,
            provenance=[fact.source, *fact.also_from],
        )


class SessionSummary(BaseModel):
    """A stored session: its place in the space, its commit state and what it added."""

    session_id: str
    seq: int
    started_at: Annotated[datetime, SAID_AT]
    participants: list[str]
    turn_count: int
    status: SessionStatus
    job_id: str | None
    stats: dict[str, int] = Field(description="what its commit did: facts in, stored, updates…")

    @classmethod
    def of(cls, record: SessionRecord) -> SessionSummary:
        session = record.session
        return cls(
            session_id=session.session_id,
            seq=record.seq,
            started_at=session.started_at,
            participants=session.participants,
            turn_count=len(session.turns),
            status=record.status,
            job_id=record.job_id,
            stats=record.stats,
        )


class StoredSession(SessionSummary):
    """A stored session with its turns, as submitted."""

    turns: list[Turn]

    @classmethod
    def of(cls, record: SessionRecord) -> StoredSession:
        summary = SessionSummary.of(record).model_dump()
        return cls(**summary, turns=record.session.turns)


class JobList(BaseModel):
    """A tenant's newest jobs, newest first."""

    items: list[Job]


class Erased(BaseModel):
    """What an erasure removed or rewrote, by id, each id once and sorted."""

    # The erasure builds it by appending as it goes (two steps may name the same id); every
    # list is always sent, so the served schema marks them all required.
    model_config = ConfigDict(json_schema_serialization_defaults_required=True)

    facts_deleted: list[str] = Field(default_factory=list)
    facts_rewritten: list[str] = Field(default_factory=list)
    events_deleted: list[str] = Field(default_factory=list)
    events_rewritten: list[str] = Field(default_factory=list)
    profiles_deleted: list[str] = Field(default_factory=list)
    profiles_rewritten: list[str] = Field(default_factory=list)
    sessions_deleted: list[str] = Field(default_factory=list)

    @field_serializer("*")
    def _each_once(self, ids: list[str]) -> list[str]:
        return sorted(set(ids))


class ErasureReceipt(BaseModel):
    erased: Erased


class CorrectionReceipt(BaseModel):
    """What a correction changed: the fact as it now reads (its history ends with the text
    it replaced), and what was rebuilt from it."""

    model_config = ConfigDict(json_schema_serialization_defaults_required=True)

    fact: Fact
    changed: bool = Field(
        description="false when the fact already read so: nothing was written (the same "
        "correction sent again)"
    )
    events_rewritten: list[str] = Field(default_factory=list)
    profiles_rewritten: list[str] = Field(default_factory=list)
    profiles_deleted: list[str] = Field(default_factory=list)
    superseded: list[str] = Field(
        default_factory=list,
        description="other facts the verifier finds the corrected text corrects or "
        "supersedes; left as they are (correct or erase them too)",
    )


class SpaceCounts(BaseModel):
    sessions: int
    facts: int
    events: int
    profiles: int


# A creation time in ISO 8601: `isoformat()` ("+00:00"), as the API has always written a
# space's (pydantic's own is "Z"). Tenants and keys made before they carried one read as
# Unix seconds and are written out the same way.
Stamp = Annotated[
    datetime,
    PlainSerializer(datetime.isoformat, return_type=str, when_used="json"),
    Field(json_schema_extra={"format": "date-time"}),
]


class Space(BaseModel):
    name: str
    created_at: Stamp
    participants: list[str]
    counts: SpaceCounts


class SpaceList(BaseModel):
    items: list[Space]


class Tenant(BaseModel):
    name: str
    created_at: Stamp


class TenantList(BaseModel):
    items: list[Tenant]


class NewKey(BaseModel):
    """A tenant's new key: `api_key` is shown this once and never stored."""

    tenant: str
    key_id: str
    created_at: Stamp
    api_key: str


class KeyInfo(BaseModel):
    key_id: str
    created_at: Stamp | None


class KeyList(BaseModel):
    items: list[KeyInfo]


class Ping(BaseModel):
    """A query worker's answer to a ping: it runs, and whether it reaches the store."""

    worker: bool
    store: bool
    reason: str | None = None


class Health(BaseModel):
    status: Literal["ok"]


class Readiness(BaseModel):
    """Each check, and why it failed; a check not reached is left out (`worker` and `store`
    are reached only with `/readyz?deep=true`)."""

    status: Literal["ready", "not ready"]
    redis: bool | None = Field(
        default=None, description="Redis answers (left out where `atommem serve` has none)"
    )
    worker: bool | None = None
    store: bool | None = None
    redis_error: str | None = None
    worker_error: str | None = None
    store_error: str | None = None
    waiting: bool | None = Field(
        default=None,
        description="a slot is free for a request that waits on a worker (`api.wait_slots`); "
        "false: this process is saturated",
    )
    waiting_error: str | None = None
