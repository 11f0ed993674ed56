"""What search and ask return: ranked facts with provenance, profiles used, the answer."""

from __future__ import annotations

from datetime import date, datetime
from typing import Literal

from pydantic import BaseModel, Field

from common.models.memory import FactTime, TimeRange

CONTEXT_TOKENS = 1000  # a context block's default budget
# How recall reads memory (docs/recall.md, "Modes"); `retrieval.mode` is the default.
RecallMode = Literal["full", "flat", "no-graph", "no-profile"]
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
    score: float = Field(
        description="the rank fusion's score the hits are ordered by (compare it only within "
        "one reply)"
    )
    relevance: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="S_h(fact, question) = alpha*cos + beta*L in [0, 1]: comparable across "
        "questions, what `min_score` holds hits to",
    )
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
    """Why graph recall found what it did: every seed and every hit, then the most activated
    expanded facts (up to 40 nodes in all, unless the seeds and hits alone are more), and the
    strongest edges between them, one per pair of facts and channel (the walk ran over
    `local_nodes` facts and `edges_total` such edges)."""

    nodes: list[GraphNode]
    edges: list[GraphEdge]
    local_nodes: int
    edges_total: int


class PendingTurn(BaseModel):
    """A turn of a session accepted but not yet committed to memory, found by its own S_h."""

    status: Literal["pending"] = "pending"
    session_id: str
    turn_id: str
    position: int
    speaker: str
    text: str
    time: datetime = Field(description="when its session started")
    score: float = Field(
        description="S_h = alpha*cos + beta*L with the facts' weights, L being BM25 over the "
        "pending turns searched, scaled to [0, 1]"
    )


class SearchResponse(BaseModel):
    question: str
    intent: QueryIntent
    hits: list[SearchHit]
    pending: list[PendingTurn] = Field(
        default_factory=list,
        description="turns of the space's sessions accepted but not yet committed (in the "
        "queues or being extracted), in every mode: each turn's S_h = alpha*cos(turn, "
        "question) + beta*L, the facts' weights, L = BM25 over the pending turns searched "
        "scaled to [0, 1]; the top `retrieval.pending_top_k` with S_h at least "
        "`retrieval.pending_min_score`, best first. Beside `hits`, never merged into them; a "
        "turn that is already the source of a hit is left out",
    )
    pending_cut: int = Field(
        default=0,
        description="pending turns not searched: a backlog past `retrieval.pending_max_turns` "
        "is searched newest sessions first",
    )
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
    answer_fact_ids: list[str] = Field(
        description="the evidence the answer used: fact ids; `profile:<profile id>` for the "
        "profile in force that leads an answer about a lasting trait; for a pending turn "
        "(evidence after the facts) `pending:<session_id>:<turn id>`"
    )


class ContextItem(BaseModel):
    """One line of a context block: what its label (`[P1]`, `[F1]`, `[E1]`, `[T1]`) cites."""

    label: str
    kind: Literal["profile", "fact", "event", "pending"]
    id: str = Field(
        description="the profile, fact or event id; a pending turn's `pending:<session_id>:"
        "<turn id>`"
    )
    text: str
    session_id: str | None = None
    turn_ids: list[str] = Field(default_factory=list)
    when: str | None = Field(
        default=None,
        description="a fact's day (or days) and a profile's start, as the block prints them",
    )
    relevance: float | None = None


class ContextResponse(BaseModel):
    """A prompt-ready block of what memory holds for a question: the profiles in force at
    `as_of`, the ranked facts with their dates and sessions, the summaries of the events
    recall used, the turns not yet processed; each line labelled, what a label cites in
    `items`."""

    question: str
    as_of: datetime = Field(description="the time the profiles in force are read at")
    text: str = Field(description="the block, to place in a prompt as it is")
    tokens: int = Field(description="the block's length counted as the budget counts it")
    max_tokens: int
    items: list[ContextItem] = Field(description="the lines of the block in order")
    left_out: int = Field(description="lines that did not fit in `max_tokens`")
