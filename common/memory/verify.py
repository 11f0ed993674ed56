"""Verification (§3.1.3): candidate filter, duplicate drop, residual store, conflict updates."""

from __future__ import annotations

import numpy as np

from common.llm import usage
from common.llm.contracts import FactView
from common.memory.changes import Changes, CommitStats
from common.memory.context import MemoryContext
from common.models.memory import Fact, FactRevision, FactTime
from common.store.space_index import SpaceIndex


def view(fact: Fact, score: float | None = None) -> FactView:
    return FactView(
        id=fact.id,
        text=fact.text,
        participants=fact.participants,
        keywords=fact.keywords,
        time=fact.time,
        score=score,
    )


def candidate_mask(index: SpaceIndex, fact: Fact) -> np.ndarray:
    """Facts sharing a participant whose time does not rule them out."""
    mask = index.facts.mask(fact.participants)
    return index.facts.time_compatible(mask, fact.time.event)


def place_fact(
    ctx: MemoryContext,
    index: SpaceIndex,
    fact: Fact,
    vector: np.ndarray,
    changes: Changes,
    stats: CommitStats,
) -> Fact | None:
    """Verify `fact` against the space; return it when it is to be stored as a new fact."""
    cfg = ctx.settings.memory
    mask = candidate_mask(index, fact)
    rows = np.flatnonzero(mask)
    if rows.size:
        cos = index.facts.matrix[rows] @ vector
        best = int(np.argmax(cos))
        if cos[best] > cfg.duplicate_threshold:
            _merge_duplicate(index, index.facts.ids[rows[best]], fact, changes)
            stats.duplicates_dropped += 1
            return None
    ranked = index.facts.hybrid(
        vector, fact.keywords, ctx.settings.similarity, mask, k=cfg.conflict_top_k
    )
    close = [r for r in ranked if r.score > cfg.conflict_threshold][: cfg.conflict_top_k]
    if not ctx.settings.llm.skip_rules:
        close = ranked[: cfg.conflict_top_k]  # the paper's way: always ask
    elif not close:  # nothing close enough to repeat or contradict it: store as is
        stats.llm_calls_skipped += 1
        usage.skipped("verify")
        return fact
    stats.llm_calls += 1
    decision = ctx.backend.verify(view(fact), [view(index.facts.get(r.id), r.score) for r in close])
    allowed = {r.id for r in close}
    for update in decision.updates:
        if update.fact_id not in allowed:
            continue  # a verifier may only touch the candidates it was shown
        _apply_update(ctx, index, update.fact_id, update.text, fact, vector, changes)
        stats.updates += 1
    if not decision.store and close:  # with nothing shown, nothing can already say it
        return None
    if decision.residual and decision.residual.strip() and decision.residual != fact.text:
        fact = fact.model_copy(update={"text": decision.residual.strip()})
        vector[:] = ctx.embedder.encode([fact.text])[0]
    return fact


def _merge_duplicate(index: SpaceIndex, kept_id: str, dup: Fact, changes: Changes) -> None:
    """Keep the stored fact and record the duplicate's turns as further provenance."""
    kept = index.facts.get(kept_id)
    known = {t for t in kept.all_turn_ids()}
    if set(dup.source.turn_ids) <= known:
        return
    kept = kept.model_copy(update={"also_from": [*kept.also_from, dup.source]})
    vector = index.facts.vector(kept_id).copy()
    index.put_fact(kept, vector)
    changes.fact(kept, vector)


def _apply_update(
    ctx: MemoryContext,
    index: SpaceIndex,
    target_id: str,
    text: str,
    new: Fact,
    new_vector: np.ndarray,
    changes: Changes,
) -> None:
    """Rewrite a stored fact with the verified content, keeping its previous state."""
    old = index.facts.get(target_id)
    vector = new_vector.copy() if text == new.text else ctx.embedder.encode([text])[0]
    keywords = new.keywords if text == new.text else old.keywords
    revision = FactRevision(
        text=old.text,
        keywords=old.keywords,
        time=old.time,
        replaced_by_session=new.source.session_id,
        replaced_with_fact=new.id,
    )
    updated = old.model_copy(
        update={
            "text": text,
            "keywords": keywords,
            "time": FactTime(event=new.time.event, session=new.time.session),
            "also_from": [*old.also_from, new.source],
            "history": [*old.history, revision],
        }
    )
    index.put_fact(updated, vector)
    changes.fact(updated, vector)
