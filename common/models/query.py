"""What search and ask return: ranked facts with provenance, profiles used, the answer."""

from __future__ import annotations

from datetime import date
from typing import Literal

from pydantic import BaseModel, Field

from common.models.memory import FactTime, TimeRange

AnswerStyle = Literal["factual", "temporal", "open"]
Channel = Literal["keyword", "event", "turn"]


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


class GraphNode(BaseModel):
    fact_id: str
    text: str
    role: Literal["seed", "expanded"] = Field(
        description="a seed came from the primary or compensatory stage; an expanded fact was "
        "reached from the seeds through the graph"
    )
    activation: float = Field(description="its share of the random walk with restart")
    rank: int | None = Field(description="its place in `hits` (0-based), or null")


class GraphEdge(BaseModel):
    source: str
    target: str
    channel: Channel
    weight: float


class RecallGraph(BaseModel):
    """Why graph recall found what it did: the seeds, the strongest expanded facts, and the
    edges between them by channel (the walk ran over `local_nodes` facts, `edges_total`
    edges)."""

    nodes: list[GraphNode]
    edges: list[GraphEdge]
    local_nodes: int
    edges_total: int


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
    graph: RecallGraph | None = Field(
        default=None,
        description="with `explain`: the recall graph (null in the modes without one)",
    )


class AskResponse(SearchResponse):
    answer: str
    answer_fact_ids: list[str]
