"""Committing a session to a space: verification and events, then the profile batch.

Each stage computes its changes in memory and reaches the store in two writes: the session
record with the stage's plan, then every planned point together with the session record
marked done. A stage interrupted after the first write is finished by re-applying its plan
(with the done record, again one write), so a crash never leaves half a session behind.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from common import embeddings
from common.context import MemoryContext
from common.llm import usage
from common.memory.changes import Changes, CommitStats, apply_plan
from common.memory.events import refresh_events, route_event, settle_events
from common.memory.profiles import run_profile_batch
from common.memory.verify import place_fact
from common.memory.version import memory_version
from common.models.drafts import DraftFact
from common.models.memory import Fact, FactSource, FactTime
from common.models.plan import Plan, unpack_vector
from common.models.session import SessionRecord, SessionStatus
from common.priority import questions
from common.store import records
from common.store.base import Kind
from common.store.space_index import SpaceIndex


def _to_fact(index: SpaceIndex, record: SessionRecord, draft: DraftFact) -> Fact:
    return Fact(
        id=draft.id,
        tenant=index.tenant,
        space=index.space,
        text=draft.text,
        participants=draft.participants,
        keywords=draft.keywords,
        time=FactTime(event=draft.event_time, session=record.session.started_at),
        source=FactSource(
            session_id=record.session.session_id,
            session_seq=record.seq,
            turn_ids=draft.turn_ids,
            positions=draft.positions,
        ),
        profile_pending=draft.profile_worthy,
    )


def _run_stage(
    ctx: MemoryContext,
    record: SessionRecord,
    running: SessionStatus,
    finished: SessionStatus,
    build: Callable[[SpaceIndex, Changes, CommitStats], None],
    guard: Callable[[], None] | None = None,
) -> CommitStats:
    """Compute a stage's changes, record the plan, then write it with the stage marked
    finished. `guard` runs just before the first write and raises if the stage may no
    longer write (its space's lock lapsed while it computed)."""
    index = ctx.index(record.tenant, record.space)
    changes = Changes(version=memory_version(ctx.settings))
    stats = CommitStats()
    # The in-memory index may hold half a stage if it fails: `changing` drops it then (it is
    # reloaded from the store next time), and no saved copy is taken while it runs.
    with ctx.changing(record.tenant, record.space):
        with usage.metered() as used, embeddings.ahead():
            build(index, changes, stats)
        stats.add_usage(used.as_counts())
        merged = dict(record.stats)
        for name, value in stats.counts().items():
            merged[name] = merged.get(name, 0) + value
        plan = changes.plan()
        # The stage's counts go with its plan: a run that resumes the plan reports them too.
        planned = record.model_copy(update={"status": running, "plan": plan, "stats": merged})
        done = record.model_copy(update={"status": finished, "plan": None, "stats": merged})
        if guard is not None:
            guard()
        with ctx.store.together():  # one flush for both writes, before the stage returns
            records.put_session(ctx.store, planned)
            apply_plan(ctx.store, plan, records.session_point(done))
    record.status, record.plan, record.stats = finished, None, merged
    ctx.committed(index)
    return stats


def commit_facts(
    ctx: MemoryContext,
    record: SessionRecord,
    drafts: list[DraftFact],
    extraction: dict[str, int] | None = None,
    guard: Callable[[], None] | None = None,
    defer_events: bool = False,
) -> CommitStats:
    """Verify each draft against the space, store it, and route it into events.
    `extraction` is what extracting the drafts cost (model calls and tokens), so the
    session's counts cover every stage. `defer_events`: the space's next session is ready
    behind this one, so the events' summaries may wait for it (`settle_events`)."""

    def build(index: SpaceIndex, changes: Changes, stats: CommitStats) -> None:
        stats.add_usage(extraction or {})
        stats.turns = len(record.session.turns)
        stats.facts_in = len(drafts)
        touched: set[str] = set()
        vectors = {d.id: unpack_vector(d.vector) for d in drafts if d.id not in index.facts}
        if vectors:
            index.facts.prime(np.stack(list(vectors.values())))
        try:
            for draft in drafts:
                if draft.id not in vectors or draft.id in index.facts:
                    continue  # committed by an earlier run of this stage
                questions.checkpoint()
                touched |= _commit_draft(index, draft, vectors[draft.id], changes, stats)
        finally:
            index.facts.unprime()
        settle_events(ctx, index, touched, changes, stats, defer_events)

    def _commit_draft(
        index: SpaceIndex,
        draft: DraftFact,
        vector: np.ndarray,
        changes: Changes,
        stats: CommitStats,
    ) -> set[str]:
        fact = place_fact(ctx, index, _to_fact(index, record, draft), vector, changes, stats)
        if fact is None:
            return set()
        index.put_fact(fact, vector)
        changes.fact(fact, vector)
        stats.facts_stored += 1
        return route_event(ctx, index, index.facts.get(fact.id), vector, changes, stats)

    return _run_stage(ctx, record, "committing", "committed", build, guard)


def profile_batch(
    ctx: MemoryContext, record: SessionRecord, guard: Callable[[], None] | None = None
) -> CommitStats:
    """The end-of-session profile batch over the space's pending candidates."""

    def build(index: SpaceIndex, changes: Changes, stats: CommitStats) -> None:
        run_profile_batch(ctx, index, changes, stats)

    return _run_stage(ctx, record, "profiling", "done", build, guard)


def resume(ctx: MemoryContext, record: SessionRecord) -> SessionRecord:
    """Finish a stage whose plan was recorded but perhaps not fully applied: the plan and
    the session record marked done, in one write."""
    if record.plan is None:
        return record
    finished: SessionStatus = "committed" if record.status == "committing" else "done"
    done = record.model_copy(update={"status": finished, "plan": None})
    apply_plan(ctx.store, record.plan, records.session_point(done))
    ctx.indexes.drop(record.tenant, record.space)
    if ctx.versions is not None:
        ctx.versions.bump_version(record.tenant, record.space)
    return done


def profile_flush(ctx: MemoryContext, tenant: str, space: str) -> CommitStats:
    """An on-demand profile batch outside any session, in one write. Profiles come first in
    it: a backend that writes kind by kind stores them before the pending flags are cleared,
    so an interruption can only repeat work, never lose it."""
    index = ctx.index(tenant, space)
    changes = Changes(version=memory_version(ctx.settings))
    stats = CommitStats()
    with ctx.changing(tenant, space):
        with usage.metered() as used:
            run_profile_batch(ctx, index, changes, stats)
        stats.add_usage(used.as_counts())
        points = sorted(changes.plan().points, key=lambda p: p.kind != Kind.PROFILES.value)
        apply_plan(ctx.store, Plan(points=points))
    ctx.committed(index)
    return stats


def settle_lagging(ctx: MemoryContext, tenant: str, space: str) -> bool:
    """Revise the summaries that a commit left lagging for a next session that then never
    committed (it failed or was erased), in one write, when this process holds the space's
    index up to date (a space that is not held is settled by its next commit). True when
    something was written."""
    index = ctx.held_index(tenant, space)
    if index is None or not index.stale_events():
        return False
    changes = Changes(version=memory_version(ctx.settings))
    with ctx.changing(tenant, space):
        with usage.metered(), embeddings.ahead():
            refresh_events(ctx, index, index.stale_events(), changes, CommitStats())
        apply_plan(ctx.store, changes.plan())
    ctx.committed(index)
    return True
