"""The extraction stage: windows of turns -> draft facts with metadata and vectors (no writes)."""

from __future__ import annotations

from collections import defaultdict

from common.context import MemoryContext
from common.llm import usage
from common.llm.contracts import ExtractedFact, ExtractionWindow, FactMetadata, MetadataGroup
from common.models import ids
from common.models.drafts import DraftFact
from common.models.plan import pack_vector
from common.models.session import SessionInput
from common.text.keywords import extract_keywords


def chunks(session: SessionInput, size: int, context_k: int) -> list[tuple[SessionInput, int]]:
    """The session cut into extraction tasks of `size` turns, each with the `context_k` turns
    before it prepended as context; returns (chunk, number of leading context turns)."""
    out = []
    for start in range(0, len(session.turns), size):
        lead = max(0, start - context_k)
        chunk = session.model_copy(update={"turns": session.turns[lead : start + size]})
        out.append((chunk, start - lead))
    return out


def windows(session: SessionInput, context_k: int, skip: int = 0) -> list[ExtractionWindow]:
    """One window per turn after the first `skip`, with the `context_k` turns before it."""
    out = []
    for i, turn in enumerate(session.turns):
        if i < skip:
            continue
        out.append(
            ExtractionWindow(
                session_id=session.session_id,
                started_at=session.local_time,  # anchors in the session's own time
                participants=session.participants,
                context=session.turns[max(0, i - context_k) : i],
                turns=[turn],
            )
        )
    return out


def extracted_facts(
    ctx: MemoryContext, session: SessionInput, skip: int = 0
) -> list[ExtractedFact]:
    """Pre-extracted facts as given, else the configured Fact Executor over each window."""
    if session.pre_extracted:
        return [
            ExtractedFact(text=text.strip(), turn_ids=[turn.id or ""])
            for turn in session.turns[skip:]
            for text in (turn.facts or [])
            if text.strip()
        ]
    todo = windows(session, ctx.settings.memory.context_window_k, skip)
    if ctx.settings.llm.skip_rules:
        # A turn with no content word ("Thanks!", "Haha, yes") states nothing to extract.
        names = session.participants
        kept = [w for w in todo if any(extract_keywords(t.text, names) for t in w.turns)]
        usage.skipped("extract", len(todo) - len(kept))
        todo = kept
    batches = ctx.backend.extract_facts_batch(todo)
    return [fact for batch in batches for fact in batch]


def draft_session(
    ctx: MemoryContext,
    tenant: str,
    space: str,
    session: SessionInput,
    skip: int = 0,
) -> list[DraftFact]:
    """Facts of the session's turns after the first `skip` (context), with metadata,
    embeddings and deterministic ids. Pure: writes nothing, so a retry is harmless."""
    facts = extracted_facts(ctx, session, skip)
    turns = {t.id: t for t in session.turns}
    people = session.participants
    by_speaker: dict[str, list[int]] = defaultdict(list)
    for i, fact in enumerate(facts):
        by_speaker[turns[fact.turn_ids[0]].speaker].append(i)
    groups = [
        MetadataGroup(
            texts=[facts[i].text for i in members],
            speaker=speaker,
            participants=people,
            said_at=session.local_time,
        )
        for speaker, members in by_speaker.items()
    ]
    metadata: dict[int, FactMetadata] = {}
    for members, metas in zip(
        by_speaker.values(), ctx.backend.fact_metadata_batch(groups), strict=True
    ):
        for i, meta in zip(members, metas, strict=True):
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
                vector=pack_vector(vectors[i]),
            )
        )
        per_turn[key] += 1
    return drafts
