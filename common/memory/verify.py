"""Verification (§3.1.3): candidate filter, duplicate drop, residual store, conflict updates."""

from __future__ import annotations

import numpy as np

from common.context import MemoryContext
from common.llm import usage
from common.llm.contracts import FactUpdate, FactView
from common.memory.changes import Changes, CommitStats
from common.models.memory import Fact, FactRevision, FactTime
from common.similarity import TextQuery
from common.store.space_index import Scored, SpaceIndex


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


def duplicate_of(
    ctx: MemoryContext, index: SpaceIndex, vector: np.ndarray, mask: np.ndarray
) -> str | None:
    """The candidate (of `mask`) that `vector`'s text repeats: the closest one, when its
    cosine is over `memory.duplicate_threshold`."""
    rows = np.flatnonzero(mask)
    if rows.size:
        best, cosine = index.facts.closest(vector, rows)
        if cosine > ctx.settings.memory.duplicate_threshold:
            return index.facts.ids[int(rows[best])]
    return None


def close_facts(
    ctx: MemoryContext, index: SpaceIndex, fact: Fact, vector: np.ndarray, mask: np.ndarray
) -> list[Scored] | None:
    """The candidates the verifier is shown for `fact`, best first; None when the rules
    skip the verifier (nothing close enough to repeat or contradict it)."""
    cfg = ctx.settings.memory
    ranked = index.facts.hybrid(
        vector,
        TextQuery.of(fact.text, fact.keywords),
        ctx.settings.similarity,
        mask,
        k=cfg.conflict_top_k,
    )
    if not ctx.settings.llm.skip_rules:
        return ranked[: cfg.conflict_top_k]  # the paper's way: always ask
    close = [r for r in ranked if r.score > cfg.conflict_threshold][: cfg.conflict_top_k]
    if not close:
        usage.skipped("verify")
        return None
    return close


def place_fact(
    ctx: MemoryContext,
    index: SpaceIndex,
    fact: Fact,
    vector: np.ndarray,
    changes: Changes,
    stats: CommitStats,
) -> Fact | None:
    """Verify `fact` against the space; return it when it is to be stored as a new fact."""
    mask = candidate_mask(index, fact)
    kept_id = duplicate_of(ctx, index, vector, mask)
    if kept_id is not None:
        _merge_duplicate(index, kept_id, fact, changes)
        stats.duplicates_dropped += 1
        return None
    close = close_facts(ctx, index, fact, vector, mask)
    if close is None:  # store as is
        return fact
    decision = ctx.backend.verify(view(fact), [view(index.facts.get(r.id), r.score) for r in close])
    allowed = {r.id for r in close}
    # a verifier may only touch the candidates it was shown
    updates = [u for u in decision.updates if u.fact_id in allowed]
    keep = decision.store or not close  # with nothing shown, nothing can already say it
    residual = None
    if keep and decision.residual and decision.residual.strip() and decision.residual != fact.text:
        residual = decision.residual.strip()
    known = _vectors(ctx, index, fact, vector, updates, residual)
    for update in updates:
        _apply_update(index, update.fact_id, update.text, fact, known[update.text], changes)
        stats.updates += 1
    if not keep:
        return None
    if residual is not None:
        fact = fact.model_copy(update={"text": residual})
        vector[:] = known[residual]
    return fact


def _vectors(
    ctx: MemoryContext,
    index: SpaceIndex,
    fact: Fact,
    vector: np.ndarray,
    updates: list[FactUpdate],
    residual: str | None,
) -> dict[str, np.ndarray]:
    """A vector for every text the verdict writes: a text the new fact or an updated fact
    already has keeps its vector; the others are embedded together, in one call."""
    known = {fact.text: vector.copy()}
    for update in updates:
        old = index.facts.get(update.fact_id)
        known.setdefault(old.text, index.facts.vector(old.id).copy())
    wanted = [update.text for update in updates] + ([residual] if residual is not None else [])
    fresh = list(dict.fromkeys(t for t in wanted if t not in known))
    if fresh:
        known.update(zip(fresh, ctx.embedder.encode(fresh), strict=True))
    return known


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
    index: SpaceIndex,
    target_id: str,
    text: str,
    new: Fact,
    text_vector: np.ndarray,
    changes: Changes,
) -> None:
    """Rewrite a stored fact with the verified content (`text_vector` is the vector of
    `text`), keeping its previous state."""
    old = index.facts.get(target_id)
    vector = text_vector.copy()
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
