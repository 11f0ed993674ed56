"""The extraction stage: windows of turns -> draft facts with metadata and vectors (no writes)."""

from __future__ import annotations

from collections import defaultdict

from common.llm.contracts import ExtractedFact, ExtractionWindow, FactMetadata
from common.memory.context import MemoryContext
from common.models import ids
from common.models.drafts import DraftFact
from common.models.session import SessionInput


def windows(session: SessionInput, context_k: int) -> list[ExtractionWindow]:
    """One window per turn, with the `context_k` turns before it as context."""
    out = []
    for i, turn in enumerate(session.turns):
        out.append(
            ExtractionWindow(
                session_id=session.session_id,
                started_at=session.started_at,
                participants=session.participants,
                context=session.turns[max(0, i - context_k) : i],
                turns=[turn],
            )
        )
    return out


def extracted_facts(ctx: MemoryContext, session: SessionInput) -> list[ExtractedFact]:
    """Pre-extracted facts as given, else the configured Fact Executor over each window."""
    if session.pre_extracted:
        return [
            ExtractedFact(text=text.strip(), turn_ids=[turn.id or ""])
            for turn in session.turns
            for text in (turn.facts or [])
            if text.strip()
        ]
    facts: list[ExtractedFact] = []
    for window in windows(session, ctx.settings.memory.context_window_k):
        facts.extend(ctx.backend.extract_facts(window))
    return facts


def draft_session(
    ctx: MemoryContext,
    tenant: str,
    space: str,
    session: SessionInput,
    known_people: list[str],
    facts: list[ExtractedFact] | None = None,
) -> list[DraftFact]:
    """Metadata and embeddings for a session's facts, with deterministic ids."""
    if facts is None:
        facts = extracted_facts(ctx, session)
    turns = {t.id: t for t in session.turns}
    people = session.participants + [p for p in known_people if p not in session.participants]
    by_speaker: dict[str, list[int]] = defaultdict(list)
    for i, fact in enumerate(facts):
        by_speaker[turns[fact.turn_ids[0]].speaker].append(i)
    metadata: dict[int, FactMetadata] = {}
    for speaker, members in by_speaker.items():
        texts = [facts[i].text for i in members]
        for i, meta in zip(
            members,
            ctx.backend.fact_metadata(texts, speaker, people, session.started_at),
            strict=True,
        ):
            metadata[i] = meta
    vectors = ctx.embedder.encode([f.text for f in facts])
    per_turn: dict[str, int] = defaultdict(int)
    drafts = []
    for i, fact in enumerate(facts):
        meta = metadata[i]
        key = fact.turn_ids[0]
        drafts.append(
            DraftFact(
                id=ids.fact_id(tenant, space, session.session_id, key, per_turn[key]),
                text=fact.text,
                turn_ids=fact.turn_ids,
                positions=[turns[t].position or 0 for t in fact.turn_ids],
                participants=meta.participants,
                keywords=meta.keywords,
                event_time=meta.event_time,
                profile_worthy=meta.profile_worthy,
                vector=vectors[i].astype(float).tolist(),
            )
        )
        per_turn[key] += 1
    return drafts
