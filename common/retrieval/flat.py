"""Flat recall over a space's facts by S_h, with the intent's participant and time filters.

The hierarchical recall with events and the associative graph builds on these pieces.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, date, datetime

import numpy as np

from common.errors import InvalidInput
from common.llm.contracts import Answer, EvidenceItem, QueryIntent
from common.memory.context import MemoryContext
from common.models.memory import Fact, Profile, ProfileVersion
from common.models.query import AskResponse, ProfileHit, SearchHit, SearchResponse
from common.store import records


@dataclass
class Hit:
    fact: Fact
    score: float
    cosine: float
    jaccard: float


@dataclass
class SearchResult:
    question: str
    intent: QueryIntent
    hits: list[Hit]
    profiles: list[tuple[Profile, Profile | ProfileVersion]] = field(default_factory=list)


@dataclass
class AskResult:
    search: SearchResult
    answer: Answer


def search(
    ctx: MemoryContext,
    tenant: str,
    space: str,
    question: str,
    k: int | None = None,
    now: datetime | None = None,
) -> SearchResult:
    """Top-k facts for a question by S_h after the intent's filters."""
    if not question.strip():
        raise InvalidInput("the question is empty")
    space_record = records.require_space(ctx.store, tenant, space)
    index = ctx.index(tenant, space)
    now = now or datetime.now(UTC).replace(tzinfo=None)
    intent = ctx.backend.query_intent(question, space_record.participants, now)
    vector = ctx.embedder.encode([question])[0]
    k = k or ctx.settings.retrieval.final_top_k
    mask = index.facts.mask(intent.participants or None)
    mask = index.facts.time_compatible(mask, intent.time_range)
    if not mask.any():
        mask = index.facts.mask()
    ranked = index.facts.hybrid(vector, intent.keywords, ctx.settings.similarity, mask, k=k)
    hits = [Hit(index.facts.get(r.id), r.score, r.cosine, r.jaccard) for r in ranked]
    profiles: list[tuple[Profile, Profile | ProfileVersion]] = []
    if intent.needs_profile and ctx.settings.retrieval.mode not in ("flat", "no-profile"):
        profiles = top_profiles(ctx, tenant, space, intent, vector, now.date())
    return SearchResult(question=question, intent=intent, hits=hits, profiles=profiles)


def top_profiles(
    ctx: MemoryContext,
    tenant: str,
    space: str,
    intent: QueryIntent,
    vector: np.ndarray,
    day: date,
) -> list[tuple[Profile, Profile | ProfileVersion]]:
    """The k_p closest profiles of the participants, each in the version valid on `day`."""
    index = ctx.index(tenant, space)
    when = intent.time_range.end if intent.time_range else day
    mask = index.profiles.mask(intent.participants or None)
    ranked = index.profiles.hybrid(
        vector,
        intent.keywords,
        ctx.settings.similarity,
        mask,
        k=ctx.settings.retrieval.profile_top_k,
    )
    out = []
    for r in ranked:
        profile = index.profiles.get(r.id)
        version = profile.version_at(when)
        if version is not None:
            out.append((profile, version))
    return out


def ask(
    ctx: MemoryContext, tenant: str, space: str, question: str, now: datetime | None = None
) -> AskResult:
    """Search, then an answer from the configured backend with its evidence."""
    result = search(ctx, tenant, space, question, now=now)
    evidence = [
        EvidenceItem(fact_id=h.fact.id, text=h.fact.text, score=h.score, time=h.fact.time)
        for h in result.hits
    ]
    answer = ctx.backend.answer(question, result.intent, evidence)
    return AskResult(search=result, answer=answer)


def search_response(result: SearchResult) -> SearchResponse:
    """The wire form of a search result."""
    return SearchResponse(
        question=result.question,
        intent=result.intent,
        hits=[
            SearchHit(
                fact_id=h.fact.id,
                text=h.fact.text,
                score=h.score,
                cosine=h.cosine,
                jaccard=h.jaccard,
                turn_ids=h.fact.all_turn_ids(),
                session_id=h.fact.source.session_id,
                time=h.fact.time,
            )
            for h in result.hits
        ],
        profiles=[
            ProfileHit(profile_id=p.id, person=p.person, content=v.content, valid_from=v.t_from)
            for p, v in result.profiles
        ],
    )


def ask_response(result: AskResult) -> AskResponse:
    base = search_response(result.search)
    return AskResponse(
        **base.model_dump(), answer=result.answer.text, answer_fact_ids=result.answer.fact_ids
    )
