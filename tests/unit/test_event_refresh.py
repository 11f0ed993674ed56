"""Event summaries across a space's backlog: a commit with the next session waiting behind it
leaves its events' summaries lagging (`Event.summarized`), durably, and a later commit, the
refresh batch bound, or a drain that finds the sequence empty brings them up to date: the
same summaries and vectors as refreshing at every commit, fewer encodes."""

from __future__ import annotations

import hashlib
import json
import time
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from common.context import MemoryContext
from common.memory.commit import commit_facts, settle_lagging
from common.memory.stages import Next, drain_stage
from common.models.jobs import Job
from common.models.memory import Event
from common.models.session import SessionRecord
from common.store import records
from common.store.base import Kind
from common.store.coordination.roles import Coordination
from common.store.space_index import SpaceIndex
from tests.helpers.contexts import make_ctx
from tests.helpers.doubles import TableEncoder, unit
from tests.helpers.records import draft, session_record

WHEN = datetime(2024, 3, 1, 12, 0)
# One episode that grows by a fact per session: each joins the one before it.
TEXTS = [
    ("Ann paints landscapes.", (1, 0, 0, 0)),
    ("Ann bought paint brushes.", (0.7, 0.7, 0, 0)),
    ("Ann framed a painting.", (0.5, 0.5, 0.7, 0)),
    ("Ann sold a painting.", (0.5, 0.4, 0.7, 0.3)),
    ("Ann hung a painting.", (0.4, 0.4, 0.6, 0.5)),
]


class HashEncoder(TableEncoder):
    """A vector of its own for every text (a summary's vector tells which text it embeds)."""

    def encode(self, texts: list[str]) -> np.ndarray:
        self.calls += 1
        rows = []
        for text in texts:
            seed = int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)
            v = np.random.default_rng(seed).standard_normal(self.dimension).astype(np.float32)
            rows.append(v / np.linalg.norm(v))
        return np.stack(rows) if rows else np.zeros((0, self.dimension), dtype=np.float32)


def _ctx(tmp_path: Path) -> tuple[MemoryContext, TableEncoder]:
    encoder = HashEncoder()
    ctx = make_ctx(tmp_path, encoder)
    for (text, _), (before, _) in zip(TEXTS[1:], TEXTS, strict=False):
        ctx.backend.links[text] = [before]  # type: ignore[attr-defined]
    return ctx, encoder


def _record(n: int) -> SessionRecord:
    return session_record(f"s{n}", n, WHEN + timedelta(days=n), ["Ann"])


def _commit(ctx: MemoryContext, n: int, defer: bool) -> None:
    rec = _record(n)
    text, vector = TEXTS[n]
    drafts = [draft(rec, text, unit(*vector), [text.split()[1].lower()], ["Ann"])]
    commit_facts(ctx, rec, drafts, defer_events=defer)


def _stored_events(ctx: MemoryContext) -> dict[str, tuple[Event, np.ndarray]]:
    out = {}
    for point in ctx.store.scroll(Kind.EVENTS, "t", "s", with_vectors=True):
        assert point.vector is not None
        out[point.id] = (Event.model_validate(point.payload), point.vector)
    return out


def test_deferred_summaries_end_as_refreshing_at_every_commit_with_fewer_encodes(
    tmp_path: Path,
) -> None:
    every, every_enc = _ctx(tmp_path / "every")
    for n in range(len(TEXTS)):
        _commit(every, n, defer=False)
    batched, batched_enc = _ctx(tmp_path / "batched")
    for n in range(len(TEXTS)):
        _commit(batched, n, defer=n < len(TEXTS) - 1)  # the last has nobody behind it

    want, got = _stored_events(every), _stored_events(batched)
    assert want.keys() == got.keys() and len(got) == 1
    for eid, (event, vector) in want.items():
        assert got[eid][0].model_dump(exclude={"memory_version"}) == event.model_dump(
            exclude={"memory_version"}
        )
        assert got[eid][0].summarized is None and not got[eid][0].stale
        assert np.allclose(got[eid][1], vector)
    assert batched_enc.calls == 1 < every_enc.calls  # one batch for the whole backlog


def test_a_deferring_commit_writes_its_events_lagging_and_a_reload_still_knows(
    tmp_path: Path,
) -> None:
    ctx, encoder = _ctx(tmp_path)
    for n in range(3):
        _commit(ctx, n, defer=n > 0)  # the event is made at s1 and joined at s2, both deferred
    ((event, vector),) = _stored_events(ctx).values()
    # made at s1 from two facts: its summary only stands in (the fact that made it), and it
    # was never summarised since, so all three facts are still to take in
    assert event.summarized == 0 and event.stale and len(event.fact_ids) == 3
    assert event.summary == "Ann bought paint brushes."
    assert encoder.calls == 0
    reloaded = SpaceIndex.load(ctx.store, "t", "s", 4)
    assert reloaded.stale_events() == [event.id]
    assert np.allclose(reloaded.events.vector(event.id), vector)


def test_the_refresh_batch_bounds_how_many_events_may_lag(tmp_path: Path) -> None:
    ctx, encoder = _ctx(tmp_path)
    ctx.settings.memory.event_refresh_batch = 1
    for n in range(3):
        _commit(ctx, n, defer=True)
    ((event, _),) = _stored_events(ctx).values()
    assert not event.stale and encoder.calls == 2  # s1 and s2 each refreshed their event


def test_a_drain_that_finds_no_session_settles_what_a_commit_left_lagging(
    tmp_path: Path,
) -> None:
    """The session that was to follow failed or was erased: the drain after it (the
    sequence now empty) revises the lagging summaries, in one write."""
    ctx, encoder = _ctx(tmp_path)
    for n in range(3):
        _commit(ctx, n, defer=True)
    assert ctx.index("t", "s").stale_events()
    coord = Coordination.sqlite(tmp_path / "c.sqlite")
    assert drain_stage(ctx, coord, "t", "s") == Next.NOTHING
    ((event, vector),) = _stored_events(ctx).values()
    assert not event.stale and encoder.calls == 1
    assert np.allclose(vector, encoder.encode([event.summary])[0])
    assert not ctx.index("t", "s").stale_events()
    assert not settle_lagging(ctx, "t", "s")  # nothing left: no write


def test_a_commit_defers_only_while_another_session_waits_behind_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx, _ = _ctx(tmp_path)
    coord = Coordination.sqlite(tmp_path / "c.sqlite")
    asked: list[bool] = []
    real = commit_facts

    def recording(*args: object, **kwargs: object) -> object:
        asked.append(bool(args[5]) if len(args) > 5 else bool(kwargs.get("defer_events")))
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr("common.memory.stages.commit_facts", recording)
    now = time.time()
    for n in range(2):
        rec = _record(n).model_copy(update={"status": "accepted", "job_id": f"j{n}"})
        records.put_session(ctx.store, rec)
        coord.sequence.register("t", "s", rec.session.session_id, n)
        job = Job(
            job_id=f"j{n}", tenant="t", space="s", session_id=rec.session.session_id,
            state="extracting", created_at=now, updated_at=now,
        )  # fmt: skip
        coord.jobs.put_job(job, "{}")
        text, vector = TEXTS[n]
        body = draft(rec, text, unit(*vector), ["k"], ["Ann"]).model_dump(mode="json")
        coord.chunks.put_chunk(
            "t", "s", rec.session.session_id, 0, 1, json.dumps({"drafts": [body]})
        )
    assert coord.sequence.first("t", "s", 5) == ["s0", "s1"]
    assert drain_stage(ctx, coord, "t", "s") == Next.PROFILE
    coord.sequence.unregister("t", "s", "s0")
    assert drain_stage(ctx, coord, "t", "s") == Next.PROFILE
    assert asked == [True, False]
