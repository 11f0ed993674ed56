"""Jobs: one per accepted session, with a state a client can read back."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from common.models.api import FactCorrection, ListingFilter, SearchFilters
from common.models.query import RecallMode
from common.models.session import SessionInput

JobState = Literal["queued", "extracting", "committing", "profiling", "done", "failed"]
FINISHED: frozenset[str] = frozenset({"done", "failed"})


class Job(BaseModel):
    job_id: str
    tenant: str
    space: str
    session_id: str
    state: JobState = "queued"
    reason: str | None = None
    counts: dict[str, int] = Field(default_factory=dict)
    attempts: int = 1
    unchanged: bool = Field(default=False, description="the session was already in memory")
    created_at: float
    updated_at: float


class TaskPayload(BaseModel):
    """Every task's body: validated on the task's first line."""

    # A payload that fails validation is logged by Celery with its error: never with the
    # turns or questions it holds (erased text must not survive in a log).
    model_config = ConfigDict(hide_input_in_errors=True)

    schema_version: Literal[1] = 1
    enqueued_at: float
    reply_by: float | None = Field(
        default=None,
        description="epoch seconds when the waiting caller gives up; after it the worker "
        "stores no reply (None: nobody waits on a reply, or the work runs regardless)",
    )


class AcceptPayload(TaskPayload):
    job_id: str
    tenant: str
    space: str
    session: SessionInput


class ExtractPayload(TaskPayload):
    job_id: str
    tenant: str
    space: str
    session: SessionInput = Field(description="the chunk's turns, context first")
    context_turns: int = Field(ge=0, description="how many leading turns are context only")
    chunk: int = Field(ge=0)
    chunks: int = Field(ge=1, description="how many chunks the session was cut into")
    session_hash: str = Field(
        default="",
        description="the content hash of the whole session the chunk was cut from: its drafts "
        "are committed only into a session of that content",
    )


class SpacePayload(TaskPayload):
    tenant: str
    space: str


class ProfilePayload(SpacePayload):
    session_id: str | None = None


class QueryPayload(SpacePayload):
    question: str
    k: int | None = None
    mode: RecallMode | None = None
    explain: bool = False
    min_score: float | None = None
    filters: SearchFilters | None = None
    as_of: datetime | None = None  # naive wall-clock time; None: now
    profiles: bool = False  # look profiles up whatever the question's intent says


ReadWhat = Literal[
    "spaces",
    "space",
    "facts",
    "fact",
    "events",
    "event",
    "profiles",
    "profile",
    "sessions",
    "session",
]


class ReadPayload(TaskPayload):
    """A read of stored memory through the query queue (the API never opens the store)."""

    tenant: str
    what: ReadWhat
    space: str | None = None
    item_id: str | None = None
    limit: int = Field(default=100, ge=1, le=1000)
    offset: int = Field(default=0, ge=0)
    narrow: ListingFilter | None = None  # a listing's filter (facts, events, profiles)


# `rebuild_from`: `space` is the rebuild's target (the lock held), `item_id` its source.
AdminOp = Literal[
    "create_space", "erase_space", "erase_session", "erase_fact", "correct_fact", "rebuild_from"
]


class AdminPayload(TaskPayload):
    """A write outside ingest, under the space's lock: create a space, erase, or correct a
    fact (`item_id`) as `correction` says."""

    tenant: str
    space: str
    op: AdminOp
    item_id: str | None = None
    correction: FactCorrection | None = None
