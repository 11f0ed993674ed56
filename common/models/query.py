"""What search and ask return: ranked facts with provenance, profiles used, the answer."""

from __future__ import annotations

from datetime import date
from typing import Literal

from pydantic import BaseModel, Field

from common.models.memory import FactTime, TimeRange

AnswerStyle = Literal["factual", "temporal", "open"]


class QueryIntent(BaseModel):
    """What a question asks for: who, which keywords, when, and whether profiles help."""

    needs_profile: bool = False
    participants: list[str] = Field(default_factory=list)
    keywords: list[str] = Field(default_factory=list)
    time_range: TimeRange | None = None
    style: AnswerStyle = "factual"


class SearchHit(BaseModel):
    fact_id: str
    text: str
    score: float
    stages: dict[str, float]
    turn_ids: list[str]
    session_id: str
    time: FactTime


class ProfileHit(BaseModel):
    profile_id: str
    person: str
    content: str
    valid_from: date


class EventHit(BaseModel):
    event_id: str
    summary: str
    score: float


class SearchResponse(BaseModel):
    question: str
    intent: QueryIntent
    hits: list[SearchHit]
    profiles: list[ProfileHit]
    events: list[EventHit]
    timings_ms: dict[str, float]
    llm_usage: dict[str, int] = Field(
        default_factory=dict, description="model calls and tokens: `llm.<stage>.<what>`"
    )


class AskResponse(SearchResponse):
    answer: str
    answer_fact_ids: list[str]
