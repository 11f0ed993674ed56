"""Hierarchical hybrid recall (§5): primary, compensatory through events, associative graph
with random walk with restart, and profiles; `flat`, `no-graph`, `no-profile` are ablations.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from itertools import islice

import numpy as np

from common.context import MemoryContext
from common.errors import InvalidInput
from common.llm import usage
from common.llm.contracts import Answer, EvidenceItem, QueryIntent
from common.models.api import SearchFilters
from common.models.memory import Event, Fact, FactTime, Profile, ProfileVersion
from common.models.names import nfc
from common.models.query import (
    AskResponse,
    EventHit,
    PendingTurn,
    ProfileHit,
    RecallGraph,
    RecallMode,
    SearchHit,
    SearchResponse,
)
from common.models.session import SessionInput
from common.retrieval import filters as filtering
from common.retrieval import names
from common.retrieval import pending as pending_turns
from common.retrieval.explain import recall_graph
from common.retrieval.graph import GraphResult, LocalGraph
from common.retrieval.ppr import fuse_ranks
from common.similarity import TextQuery, hybrid_many
from common.store import records
from common.store.space_index import Scored, SpaceIndex


@dataclass
class Hit:
    fact: Fact
    score: float
    stages: dict[str, float] = field(default_factory=dict)
    relevance: float = 0.0  # S_h(fact, question) in [0, 1], set on the hits returned


@dataclass
class Walk:
    """The local graph a search walked: the walk's result, how many of its first nodes are
    the seeds, and each local fact's own S_h to the question (in the result's row order)."""

    graph: GraphResult
    seeds: int
    relevance: np.ndarray


@dataclass
class SearchResult:
    question: str
    intent: QueryIntent
    hits: list[Hit]
    profiles: list[tuple[Profile, Profile | ProfileVersion]] = field(default_factory=list)
    events: list[tuple[Event, float]] = field(default_factory=list)
    timings_ms: dict[str, float] = field(default_factory=dict)
    llm_usage: dict[str, int] = field(default_factory=dict)
    graph: RecallGraph | None = None
    pending: list[pending_turns.PendingHit] = field(default_factory=list)
    pending_cut: int = 0
    walk: Walk | None = None  # in the modes that walk a graph
    profile_scores: list[float] = field(default_factory=list)  # S_h of each of `profiles`


@dataclass
class AskResult:
    search: SearchResult
    answer: Answer


class _Clock:
    def __init__(self) -> None:
        self.start = self.last = time.perf_counter()
        self.laps: dict[str, float] = {}

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.laps[name] = (now - self.last) * 1000
        self.last = now

    def done(self) -> dict[str, float]:
        self.laps["total"] = (time.perf_counter() - self.start) * 1000
        return self.laps


def _filtered(index: SpaceIndex, intent: QueryIntent, kind: str) -> np.ndarray:
    """Rows sharing a participant with the question and compatible with its time; all rows
    when the filters leave nothing."""
    rows = index.facts if kind == "facts" else index.events
    mask = rows.time_compatible(rows.mask(intent.participants or None), intent.time_range)
    return mask if mask.any() else rows.mask()


def compensatory(
    ctx: MemoryContext,
    index: SpaceIndex,
    intent: QueryIntent,
    query: TextQuery,
    vector: np.ndarray,
    exclude: set[str],
    allowed: np.ndarray | None = None,
) -> tuple[list[Hit], list[tuple[Event, float]]]:
    """Events by S_h(E,Q); their facts minus `exclude` (and, with `allowed`, only the rows it
    lets through), by S_f = w_e·S_h(E,Q) + (1−w_e)·S_h(F,Q)."""
    cfg = ctx.settings
    events = index.events.hybrid(
        vector,
        query,
        cfg.similarity,
        _filtered(index, intent, "events"),
        k=cfg.retrieval.event_top_k,
    )
    used = [  # less any event erased since it was ranked (the commit thread writes meanwhile)
        (event, e.score) for e in events if (event := index.events.find(e.id)) is not None
    ]
    best: dict[int, float] = {}
    for event, event_score in used:
        for fid in event.fact_ids:
            row = index.facts.rows.get(fid)
            if row is None or fid in exclude or not index.facts.alive[row]:
                continue
            if allowed is not None and not (row < allowed.size and allowed[row]):
                continue
            best[row] = max(best.get(row, -np.inf), event_score)
    if not best:
        return [], used
    rows = np.fromiter(best, dtype=np.int64)
    fact_scores = hybrid_many(
        index.facts.matrix[rows] @ vector,
        index.facts.lexical(query, cfg.similarity)[rows],
        cfg.similarity,
    )
    w = cfg.retrieval.event_weight
    fused = [
        (int(row), w * best[int(row)] + (1 - w) * float(fs), float(fs))
        for row, fs in zip(rows, fact_scores, strict=True)
    ]
    fused.sort(key=lambda x: (-x[1], x[0]))
    live = (  # less any fact erased since it was ranked
        Hit(fact, sf, {"compensatory": sf, "fact_sh": fh})
        for row, sf, fh in fused
        if (fact := index.facts.live(row)) is not None
    )
    return list(islice(live, cfg.retrieval.compensatory_top_k)), used


def associative(
    ctx: MemoryContext,
    index: SpaceIndex,
    intent: QueryIntent,
    query: TextQuery,
    vector: np.ndarray,
    seeds: list[Hit],
    k: int,
    allowed: np.ndarray | None = None,
) -> tuple[list[Hit], Walk]:
    """Random walk with restart over the local graph around the seeds; the top k local
    nodes by activation, or by activation fused with their own relevance (`final_ranking`),
    and the walk. With `allowed`, the walk goes through every fact but only the rows it lets
    through are returned."""
    cfg = ctx.settings.graph
    ordered = sorted(seeds, key=lambda h: -h.score)[: cfg.max_seed_facts]
    rows = [index.facts.rows[h.fact.id] for h in ordered]
    scores = np.array(
        [h.score + cfg.seed_rank_prior / (rank + 1) for rank, h in enumerate(ordered)]
    )
    result = LocalGraph(index, intent.keywords, cfg).run(rows, scores)
    local = np.asarray(result.rows, dtype=np.int64)
    relevance = hybrid_many(
        index.facts.matrix[local] @ vector,
        index.facts.lexical(query, ctx.settings.similarity)[local],
        ctx.settings.similarity,
    )
    if cfg.final_ranking == "rrf":
        final = fuse_ranks(result.activation, relevance, cfg.activation_share, cfg.rrf_k)
    else:
        final = result.activation
    by_id = {h.fact.id: h for h in ordered}
    order = np.argsort(-final, kind="stable")
    if allowed is not None:
        inside = local < allowed.size
        inside[inside] = allowed[local[inside]]
        order = order[inside[order]]
    hits: list[Hit] = []
    for i in order:
        if len(hits) == k:
            break
        fact = index.facts.live(int(local[i]))
        if fact is None:  # erased since the walk read it
            continue
        stages = dict(by_id[fact.id].stages) if fact.id in by_id else {}
        stages["graph"] = float(result.activation[i])
        stages["relevance"] = float(relevance[i])
        hits.append(Hit(fact, float(final[i]), stages))
    return hits, Walk(result, len(rows), relevance)


def query_vectors(
    ctx: MemoryContext, question: str, intent: QueryIntent
) -> tuple[np.ndarray, np.ndarray]:
    """The vector S_h ranks memory with, and the question's own embedding.

    With w = `retrieval.nameless_weight` > 0 and participants in the intent, the first is
    the embedding less w times its projection on the participants' name vectors
    (`common/retrieval/names.py`); otherwise both are the embedding. Pending turns are
    ranked with the plain embedding, which their score threshold was set on."""
    w = ctx.settings.retrieval.nameless_weight
    if w <= 0 or not intent.participants:
        plain = ctx.embedder.encode([question])[0]
        return plain, plain
    cache = names.name_vectors(ctx.embedder)
    plain, people = cache.with_names(question, intent.participants, ctx.embedder.encode)
    return names.away_from(plain, people, w), plain


def search(
    ctx: MemoryContext,
    tenant: str,
    space: str,
    question: str,
    k: int | None = None,
    now: datetime | None = None,
    mode: RecallMode | None = None,
    explain: bool = False,
    pending: Sequence[SessionInput] = (),
    min_score: float | None = None,
    filters: SearchFilters | None = None,
    profiles: bool = False,
) -> SearchResult:
    """The top-k facts for a question, with the events and profiles used and stage timings;
    with `explain`, also the recall graph (in the modes that walk one). `pending`: the
    space's sessions not yet committed (in session order), whose best turns come back
    beside the facts in every mode. Hits whose relevance S_h(F,Q) is below `min_score`
    (default `retrieval.min_relevance`) are dropped; `filters` keep only facts said in a
    time range, of given sessions or naming given people (pending turns alike). With
    `profiles`, the profiles are looked up whatever the question's intent says."""
    if not question.strip():
        raise InvalidInput("the question is empty")
    question = nfc(question)  # names in it match the participants', kept in NFC
    clock = _Clock()
    space_record = records.require_space(ctx.store, tenant, space)
    index = ctx.index(tenant, space)
    now = now or datetime.now(UTC).replace(tzinfo=None)
    with usage.metered() as used:
        intent = ctx.backend.query_intent(question, space_record.participants, now)
    clock.lap("intent")
    vector, plain = query_vectors(ctx, question, intent)
    clock.lap("embedding")
    cfg = ctx.settings.retrieval
    mode = mode or cfg.mode
    k = k or cfg.final_top_k
    sim = ctx.settings.similarity
    query = TextQuery.of(question, intent.keywords)
    index.facts.lexical(query, sim)  # kept for every stage below that ranks facts by S_h
    clock.lap("lexical")
    fmask = _filtered(index, intent, "facts")
    allowed = filtering.allowed(index.facts, filters)
    if allowed is not None:  # the caller's filters hold; the intent's only where they can
        n = min(fmask.size, allowed.size)
        both = fmask[:n] & allowed[:n]
        fmask = both if both.any() else allowed[:n]
    events: list[tuple[Event, float]] = []
    graph: RecallGraph | None = None
    walk: Walk | None = None
    if mode == "flat":
        ranked = index.facts.hybrid(vector, query, sim, fmask, k=k)
        hits = _ranked_hits(index, ranked)
        clock.lap("primary")
    else:
        ranked = index.facts.hybrid(vector, query, sim, fmask, k=cfg.primary_top_k)
        primary = _ranked_hits(index, ranked)
        clock.lap("primary")
        taken = {h.fact.id for h in primary}
        extra, events = compensatory(ctx, index, intent, query, vector, taken, allowed)
        clock.lap("compensatory")
        seeds = primary + extra
        if mode == "no-graph" or not seeds:
            hits = sorted(seeds, key=lambda h: -h.score)[:k]
        else:
            hits, walk = associative(ctx, index, intent, query, vector, seeds, k, allowed)
            clock.lap("graph")
    hits = _relevant(index, hits, vector, query, ctx, min_score)
    if explain and walk is not None:  # drawn for the hits returned, the ones under the floor gone
        graph = recall_graph(index, walk.graph, walk.seeds, [h.fact.id for h in hits])
        clock.lap("explain")
    in_force: list[tuple[Profile, Profile | ProfileVersion, float]] = []
    if (intent.needs_profile or profiles) and mode not in ("flat", "no-profile"):
        in_force = top_profiles(ctx, tenant, space, intent, query, vector, now.date())
        if filters is not None and filters.participants is not None:
            in_force = [r for r in in_force if r[0].person in filters.participants]
        clock.lap("profiles")
    found = pending_turns.PendingResult([], 0, 0)
    pending = filtering.pending_allowed(list(pending), filters)
    if pending:
        found = _pending(ctx, pending, plain, query, hits)
        clock.lap("pending")
    return SearchResult(
        question,
        intent,
        hits,
        [(p, v) for p, v, _ in in_force],
        events,
        clock.done(),
        used.as_counts(),
        graph,
        found.hits,
        found.cut,
        walk,
        [score for _, _, score in in_force],
    )


def _ranked_hits(index: SpaceIndex, ranked: list[Scored]) -> list[Hit]:
    """The primary stage's hits: the facts ranked, less any erased since (a question reads
    the space while the commit thread writes it)."""
    return [
        Hit(fact, r.score, {"primary": r.score})
        for r in ranked
        if (fact := index.facts.find(r.id)) is not None
    ]


def _relevant(
    index: SpaceIndex,
    hits: list[Hit],
    vector: np.ndarray,
    query: TextQuery,
    ctx: MemoryContext,
    min_score: float | None,
) -> list[Hit]:
    """The hits with their relevance S_h(F,Q) (clipped to [0, 1]), less those below
    `min_score` (default `retrieval.min_relevance`), in their order."""
    if not hits:
        return hits
    rows = np.array([index.facts.rows[h.fact.id] for h in hits], dtype=np.int64)
    relevance = np.clip(
        hybrid_many(
            index.facts.matrix[rows] @ vector,
            index.facts.lexical(query, ctx.settings.similarity)[rows],
            ctx.settings.similarity,
        ),
        0.0,
        1.0,
    )
    floor = ctx.settings.retrieval.min_relevance if min_score is None else min_score
    kept = []
    for hit, value in zip(hits, relevance, strict=True):
        hit.relevance = float(value)
        if hit.relevance >= floor:
            kept.append(hit)
    return kept


def _pending(
    ctx: MemoryContext,
    sessions: Sequence[SessionInput],
    vector: np.ndarray,
    query: TextQuery,
    hits: list[Hit],
) -> pending_turns.PendingResult:
    """The best turns of the pending sessions, minus those a returned fact came from (a
    session committed while the question was being answered counts once)."""
    sources = frozenset(
        (source.session_id, turn)
        for h in hits
        for source in (h.fact.source, *h.fact.also_from)
        for turn in source.turn_ids
    )
    cfg = ctx.settings.retrieval
    cache = pending_turns.turn_vectors(ctx.embedder)
    return pending_turns.rank(
        sessions,
        vector,
        query,
        lambda session, rows: cache.get(session, rows, ctx.embedder.encode),
        ctx.settings.similarity,
        cfg.pending_top_k,
        cfg.pending_min_score,
        cfg.pending_max_turns,
        sources,
    )


def top_profiles(
    ctx: MemoryContext,
    tenant: str,
    space: str,
    intent: QueryIntent,
    query: TextQuery,
    vector: np.ndarray,
    day: date,
) -> list[tuple[Profile, Profile | ProfileVersion, float]]:
    """The k_p closest profiles of the participants, each in the version valid on `day`, with
    its S_h to the question."""
    index = ctx.index(tenant, space)
    when = intent.time_range.end if intent.time_range else day
    mask = index.profiles.mask(intent.participants or None)
    ranked = index.profiles.hybrid(
        vector,
        query,
        ctx.settings.similarity,
        mask,
        k=ctx.settings.retrieval.profile_top_k,
    )
    out = []
    for r in ranked:
        profile = index.profiles.find(r.id)
        if profile is None:  # erased since it was ranked
            continue
        version = profile.version_at(when)
        if version is not None:
            out.append((profile, version, r.score))
    return out


def ask(
    ctx: MemoryContext,
    tenant: str,
    space: str,
    question: str,
    now: datetime | None = None,
    k: int | None = None,
    mode: RecallMode | None = None,
    explain: bool = False,
    pending: Sequence[SessionInput] = (),
    min_score: float | None = None,
    filters: SearchFilters | None = None,
    profiles: bool = False,
) -> AskResult:
    """Search, then an answer from the configured backend with its evidence: for a question
    about a lasting trait, the best profile in force when it is asked (`profile:<id>`),
    then the facts, then the pending turns (`pending:<session_id>:<turn id>`)."""
    with usage.metered() as used:
        result = search(
            ctx,
            tenant,
            space,
            question,
            k=k,
            now=now,
            mode=mode,
            explain=explain,
            pending=pending,
            min_score=min_score,
            filters=filters,
            profiles=profiles,
        )
        evidence = _in_force(result, ctx.settings.retrieval.profile_lead_margin)
        evidence += [
            EvidenceItem(fact_id=h.fact.id, text=h.fact.text, score=h.score, time=h.fact.time)
            for h in result.hits
        ]
        evidence += [
            EvidenceItem(
                fact_id=p.evidence_id,
                text=pending_turns.turn_text(p.turn),
                score=p.score,
                time=FactTime(session=p.session.started_at),
            )
            for p in result.pending
        ]
        answer = ctx.backend.answer(question, result.intent, evidence)
    result.llm_usage = used.as_counts()  # intent and answer
    return AskResult(search=result, answer=answer)


def _in_force(result: SearchResult, margin: float) -> list[EvidenceItem]:
    """The evidence that leads an answer about a lasting trait: a profile in force when the
    question is asked, when one matches it about as well as the best fact does (S_h within
    `margin`); of those within `margin` of the best profile, the one that began last (how
    things stand then, which an older trait of the same kind no longer says). A fact that
    only a version no longer in force cites ('lives in Boston' before a move) is not one
    that answers better. None for a question asking when."""
    if not result.profiles or not result.intent.needs_profile:
        return []
    if result.intent.style == "temporal":
        return []
    scores = result.profile_scores or [0.0] * len(result.profiles)
    cited = {f for p, _ in result.profiles for f in p.evidence_fact_ids}
    cited |= {f for p, _ in result.profiles for v in p.history for f in v.evidence_fact_ids}
    outdated = cited - {f for _, version in result.profiles for f in version.evidence_fact_ids}
    best_fact = max((h.relevance for h in result.hits if h.fact.id not in outdated), default=0.0)
    if max(scores) < best_fact - margin:
        return []  # a fact answers it better: the answer comes from the facts
    close = [i for i, s in enumerate(scores) if s >= max(scores) - margin]
    latest = max(close, key=lambda i: (result.profiles[i][1].t_from, -i))
    profile, version = result.profiles[latest]
    return [
        EvidenceItem(
            fact_id=f"profile:{profile.id}",
            text=version.content,
            score=1.0,
            in_force_since=version.t_from,
        )
    ]


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
                relevance=h.relevance,
                stages=h.stages,
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
        events=[EventHit(event_id=e.id, summary=e.summary, score=s) for e, s in result.events],
        timings_ms=result.timings_ms,
        llm_usage=result.llm_usage,
        graph=result.graph,
        pending=[
            PendingTurn(
                session_id=p.session.session_id,
                turn_id=str(p.turn.id),
                position=p.turn.position or 0,
                speaker=p.turn.speaker,
                text=p.turn.text,
                time=p.session.started_at,
                score=p.score,
            )
            for p in result.pending
        ],
        pending_cut=result.pending_cut,
    )


def ask_response(result: AskResult) -> AskResponse:
    base = search_response(result.search)
    return AskResponse(
        **base.model_dump(), answer=result.answer.text, answer_fact_ids=result.answer.fact_ids
    )
