"""The structured inputs and outputs of every LLM stage, shared by all backends."""

from __future__ import annotations

from datetime import date, datetime
from typing import Literal

from pydantic import BaseModel, Field

from common.models.memory import FactTime, TimeRange
from common.models.query import AnswerStyle as AnswerStyle  # the intent stage's output
from common.models.query import QueryIntent as QueryIntent
from common.models.session import Turn


class ExtractionWindow(BaseModel):
    """Turns to extract facts from, with the preceding turns as context."""

    session_id: str
    started_at: datetime
    participants: list[str]
    context: list[Turn] = Field(default_factory=list)
    turns: list[Turn]


class ExtractedFact(BaseModel):
    text: str = Field(min_length=1)
    turn_ids: list[str] = Field(min_length=1)


class MetadataGroup(BaseModel):
    """Facts of one speaker in one chunk: their metadata is asked for together."""

    texts: list[str]
    speaker: str
    participants: list[str]
    said_at: datetime


class FactMetadata(BaseModel):
    participants: list[str]
    keywords: list[str]
    event_time: TimeRange | None = None
    profile_worthy: bool = False


class FactView(BaseModel):
    """What a stage sees of a stored or incoming fact."""

    id: str
    text: str
    participants: list[str]
    keywords: list[str]
    time: FactTime
    score: float | None = Field(default=None, description="S_h against the fact being placed.")


class FactUpdate(BaseModel):
    fact_id: str
    text: str = Field(min_length=1)


class VerifyDecision(BaseModel):
    """Store the new fact (possibly reduced to its residual) and/or update existing ones."""

    store: bool = True
    residual: str | None = None
    updates: list[FactUpdate] = Field(default_factory=list)


class EventSummary(BaseModel):
    summary: str = Field(min_length=1)
    keywords: list[str]
    # Member facts the summary joins word for word (an extractive summary, `rules`): its
    # vector is then their normalised mean, not a new embedding. Empty: embed the summary.
    sources: list[str] = Field(default_factory=list)


class ProfileCandidate(BaseModel):
    person: str
    content: str
    keywords: list[str]
    fact_id: str
    valid_from: datetime
    # A trait a person holds one value of at a time (`residence`): the person's profile of
    # that slot takes the candidate as its next version, whatever the wording of either.
    slot: str | None = None


class ProfileView(BaseModel):
    id: str
    person: str
    content: str
    keywords: list[str]
    t_from: datetime
    score: float


ProfileAction = Literal["redundant", "update_current", "modify_history", "create"]


class ProfileDecision(BaseModel):
    action: ProfileAction
    profile_id: str | None = None
    content: str | None = None


class EvidenceItem(BaseModel):
    fact_id: str  # a fact's id, `profile:<id>` for a profile, `pending:<session>:<turn>`
    text: str
    score: float
    time: FactTime | None = None
    # A profile in force when the question is asked, since this day: what is true then,
    # ahead of the facts it may have replaced.
    in_force_since: date | None = None


class Answer(BaseModel):
    text: str
    fact_ids: list[str]
