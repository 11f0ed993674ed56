"""Correction: a caller rewrites a stored fact's text.

The corrected text is read as extraction reads a new fact (its participants, keywords, and
its time where it names one; when it was said stays), then verified against the space's
other facts as a new fact is: one that repeats another fact (a near-duplicate, or the
verifier finding it already said) is refused, naming that fact, since the fact would
duplicate it; facts the verifier finds it corrects or supersedes are named in the receipt
but left as they are, since a correction changes one fact. The fact keeps its id and its
provenance (`source`, `also_from`), is re-embedded, and its old text goes into its history
marked as a correction; what was built from it is rebuilt as after an erasure rewords a
fact (`erase.rebuild_reworded`). Re-running it finds the fact already corrected and writes
nothing, and an interrupted run left the fact as it was (it is written last).
"""

from __future__ import annotations

from datetime import datetime

import numpy as np

from common.context import MemoryContext
from common.errors import Conflict, NotFound
from common.memory.changes import Changes
from common.memory.erase import rebuild_reworded
from common.memory.verify import candidate_mask, close_facts, duplicate_of, view
from common.memory.version import memory_version
from common.models.api import FactCorrection
from common.models.memory import Correction, Fact, FactRevision
from common.models.responses import CorrectionReceipt, Erased
from common.store import records
from common.store.space_index import SpaceIndex


def correct_fact(
    ctx: MemoryContext,
    tenant: str,
    space: str,
    fact_id: str,
    correction: FactCorrection,
    at: datetime,
) -> CorrectionReceipt:
    """Rewrite the fact's text as `correction` says, `at` being when it was sent."""
    index = ctx.index(tenant, space)
    if fact_id not in index.facts:
        raise NotFound(f"no fact {fact_id!r} in space {space!r}")
    fact = index.facts.get(fact_id)
    text = correction.text.strip()
    if text == fact.text:
        return CorrectionReceipt(fact=fact, changed=False)
    vector = ctx.embedder.encode([text])[0]
    reread = _reread(ctx, fact, text)
    superseded = _verified(ctx, index, reread, vector)
    revision = FactRevision(
        text=fact.text,
        keywords=fact.keywords,
        time=fact.time,
        replaced_by_session=None,
        replaced_with_fact=fact.id,
        correction=Correction(at=at, reason=correction.reason),
    )
    corrected = reread.model_copy(update={"history": [*fact.history, revision]})
    report = Erased()
    with ctx.changing(tenant, space):  # the index is reloaded if the rebuild fails
        changes = Changes(version=memory_version(ctx.settings))
        index.put_fact(corrected, vector)
        changes.fact(corrected, vector)
        rebuild_reworded(ctx, index, {fact_id}, changes, report)
    return CorrectionReceipt(
        fact=index.facts.get(fact_id),
        changed=True,
        events_rewritten=sorted(set(report.events_rewritten)),
        profiles_rewritten=sorted(set(report.profiles_rewritten) - set(report.profiles_deleted)),
        profiles_deleted=sorted(set(report.profiles_deleted)),
        superseded=superseded,
    )


def _reread(ctx: MemoryContext, fact: Fact, text: str) -> Fact:
    """The fact with `text`, read by the stage that reads a new fact's metadata, in its
    session (its participants, the speaker of its first turn, its local time) when that is
    stored: who it names, its keywords, the time it names (else the fact's), and whether it
    states a trait for the profile batch."""
    names, speaker, said_at = fact.participants, (fact.participants or [""])[0], fact.time.session
    stored = records.get_session(ctx.store, fact.tenant, fact.space, fact.source.session_id)
    if stored is not None:
        session = stored.session
        names, said_at = session.participants, session.local_time
        turns = [t for t in session.turns if t.id in fact.source.turn_ids]
        speaker = turns[0].speaker if turns else speaker
    (meta,) = ctx.backend.fact_metadata([text], speaker, names, said_at)
    event = meta.event_time or fact.time.event
    return fact.model_copy(
        update={
            "text": text,
            "participants": meta.participants or fact.participants,
            "keywords": meta.keywords,
            "time": fact.time.model_copy(update={"event": event}),
            "profile_pending": fact.profile_pending or meta.profile_worthy,
        }
    )


def _verified(ctx: MemoryContext, index: SpaceIndex, fact: Fact, vector: np.ndarray) -> list[str]:
    """Check the corrected `fact` against the space's other facts as a new fact is checked:
    `Conflict` when it repeats one; else the ids of those the verifier finds it supersedes."""
    mask = candidate_mask(index, fact)
    mask[index.facts.rows[fact.id]] = False  # its own old text is what is being corrected
    repeated = duplicate_of(ctx, index, vector, mask)
    if repeated is not None:
        raise _repeats(index, fact, [repeated])
    close = close_facts(ctx, index, fact, vector, mask)
    if not close:
        return []
    shown = [index.facts.get(r.id) for r in close]
    decision = ctx.backend.verify(
        view(fact), [view(f, r.score) for f, r in zip(shown, close, strict=True)]
    )
    allowed = {r.id for r in close}  # a verifier may only name the candidates it was shown
    superseded = sorted({u.fact_id for u in decision.updates if u.fact_id in allowed})
    if not decision.store and not superseded:
        raise _repeats(index, fact, [r.id for r in close])
    return superseded


def _repeats(index: SpaceIndex, fact: Fact, said_by: list[str]) -> Conflict:
    """The refusal of a correction whose text other facts already say."""
    which = "; ".join(f"fact {f!r}: {index.facts.get(f).text!r}" for f in said_by)
    return Conflict(
        f"the corrected text of fact {fact.id!r} says what the space already holds ({which}); "
        "erase the fact instead, or correct it to say something else"
    )
