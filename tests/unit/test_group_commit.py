"""Shared work on the commit path: flushes of the embedded store grouped across writers
(and across a commit stage's writes), encodes of the embedder shared by its callers, and
commits of independent spaces under way at once."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from common.context import MemoryContext
from common.embeddings import _Coalesced, ahead
from common.llm.contracts import EventSummary, FactView
from common.memory.commit import commit_facts
from common.models.jobs import SpacePayload
from common.settings import Settings
from common.store import records
from common.store.base import Kind, Point, StoreUnavailable
from common.store.coordination.roles import Coordination
from common.store.edge import EdgeStore, StoreFlushFailed, _Flushes
from tests.helpers.contexts import make_ctx
from tests.helpers.doubles import DIM, ScriptedBackend, unit
from tests.helpers.records import draft, queued_head, session_record
from workers import runtime
from workers.tasks import pipeline

WHEN = datetime(2024, 3, 1, 12, 0)


class HeldFlush:
    """A flush that blocks until released, counting how often it ran."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.started = threading.Event()
        self.runs = 0
        self.fail = False
        self.fail_then = True  # whether the flushes after a failed one fail too

    def __call__(self) -> None:
        self.runs += 1
        self.started.set()
        self.release.wait(10)
        if self.fail:
            self.fail = self.fail_then
            raise OSError(5, "Input/output error")


def _wait_all(flushes: _Flushes, tickets: list[int], flush: HeldFlush) -> None:
    """Wait for every ticket, each on a thread of its own."""
    threads = [threading.Thread(target=flushes.wait_durable, args=(t, flush)) for t in tickets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)


def test_writers_waiting_on_a_flush_under_way_share_the_next_one() -> None:
    flushes, flush = _Flushes(), HeldFlush()
    first = flushes.applied()
    leader = threading.Thread(target=flushes.wait_durable, args=(first, flush))
    leader.start()
    assert flush.started.wait(10)  # the first flush is under way, covering update 1 only
    later = [flushes.applied() for _ in range(5)]
    waiting = threading.Thread(target=_wait_all, args=(flushes, later, flush))
    waiting.start()
    flush.release.set()
    leader.join(10)
    waiting.join(10)
    # one flush for the first update, one for the five applied while it ran
    assert flush.runs == 2


def test_a_flush_that_began_after_an_update_covers_it_without_another() -> None:
    flushes, flush = _Flushes(), HeldFlush()
    flush.release.set()
    tickets = [flushes.applied() for _ in range(3)]
    flushes.wait_durable(tickets[-1], flush)
    for ticket in tickets:
        flushes.wait_durable(ticket, flush)  # already on disk: returns without flushing
    assert flush.runs == 1


def test_updates_a_failed_flush_covered_stay_failed_after_a_later_flush_succeeds() -> None:
    flushes, flush = _Flushes(), HeldFlush()
    flush.release.set()
    flush.fail = True
    lost = flushes.applied()
    with pytest.raises(StoreFlushFailed, match="Input/output error"):
        flushes.wait_durable(lost, flush)
    flush.fail = False
    flushes.reloaded("the store was loaded again from its files")
    fresh = flushes.applied()
    flushes.wait_durable(fresh, flush)  # a new update, flushed
    with pytest.raises(StoreFlushFailed):
        flushes.wait_durable(lost, flush)  # the later flush did not bring it back


def test_no_flush_runs_after_a_failed_one_until_the_shard_is_loaded_again() -> None:
    flushes, flush = _Flushes(), HeldFlush()
    flush.release.set()
    flush.fail = True
    first = flushes.applied()
    with pytest.raises(StoreFlushFailed) as failed:
        flushes.wait_durable(first, flush)
    assert failed.value.reload  # nobody has loaded the shard again yet
    flush.fail = False
    after = flushes.applied()  # applied on top of what the disk may lack
    with pytest.raises(StoreFlushFailed, match="Input/output error"):
        flushes.wait_durable(after, flush)
    assert flush.runs == 1  # refused without flushing
    flushes.reloaded("the store was loaded again from its files")
    with pytest.raises(StoreFlushFailed) as again:
        flushes.wait_durable(after, flush)
    assert not again.value.reload  # its loss is already behind a reload: not another one


def test_a_waiter_covered_by_a_flush_that_fails_never_returns_as_durable() -> None:
    """The failure is recorded as the flush ends, so a waiter cannot slip in between, flush
    successfully and acknowledge the updates the failed flush held."""
    flushes, flush = _Flushes(), HeldFlush()
    flush.fail = True
    tickets = [flushes.applied() for _ in range(4)]
    outcomes: dict[int, str] = {}

    def wait(ticket: int) -> None:
        try:
            flushes.wait_durable(ticket, flush)
            outcomes[ticket] = "durable"
        except StoreFlushFailed:
            outcomes[ticket] = "failed"

    threads = [threading.Thread(target=wait, args=(t,)) for t in tickets]
    for t in threads:
        t.start()
    assert flush.started.wait(10)
    flush.fail_then = False  # any flush after the first would succeed
    flush.release.set()
    for t in threads:
        t.join(10)
    assert outcomes == dict.fromkeys(tickets, "failed")


def test_a_flush_interrupted_by_a_base_exception_frees_the_next_one() -> None:
    flushes = _Flushes()
    calls = 0

    def flush() -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise KeyboardInterrupt  # a panic of the engine reaches Python as a BaseException

    first = flushes.applied()
    with pytest.raises(KeyboardInterrupt):
        flushes.wait_durable(first, flush)
    with pytest.raises(StoreFlushFailed, match="interrupted"):
        flushes.wait_durable(first, flush)  # lost, not wedged behind a flush "under way"
    flushes.reloaded("the store was loaded again from its files")
    second = flushes.applied()
    flushes.wait_durable(second, flush)
    assert calls == 2


def test_a_reload_loses_what_was_not_flushed_yet() -> None:
    flushes, flush = _Flushes(), HeldFlush()
    flush.release.set()
    kept = flushes.applied()
    flushes.wait_durable(kept, flush)
    pending = flushes.applied()
    flushes.reloaded("the store was loaded again from its files")
    flushes.wait_durable(kept, flush)
    with pytest.raises(StoreFlushFailed, match="loaded again"):
        flushes.wait_durable(pending, flush)


def _point(i: int) -> Point:
    payload = {"tenant": "t", "space": "s", "text": f"fact {i}"}
    return Point(id=f"f{i}", vector=np.eye(DIM, dtype=np.float32)[i % DIM], payload=payload)


def _flushed_tickets(store: EdgeStore, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The tickets the store waits to see flushed, in order, as it waits."""
    calls: list[int] = []
    real = store._flushes.wait_durable

    def counted(ticket: int, flush: Callable[[], None]) -> None:
        calls.append(ticket)
        real(ticket, flush)

    monkeypatch.setattr(store._flushes, "wait_durable", counted)
    return calls


def test_writes_together_are_flushed_once_when_it_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = EdgeStore(tmp_path / "store", DIM)
    calls = _flushed_tickets(store, monkeypatch)
    try:
        store.upsert(Kind.FACTS, [_point(0)])
        assert len(calls) == 1  # a write alone is flushed before it returns
        with store.together():
            store.upsert(Kind.FACTS, [_point(1)])
            store.upsert(Kind.FACTS, [_point(2)])
            assert len(calls) == 1
        assert len(calls) == 2  # both, in one flush at the end
        assert {p.id for p in store.scroll(Kind.FACTS, "t", "s")} == {"f0", "f1", "f2"}
    finally:
        store.close()


def test_durable_flushes_what_together_wrote_so_far_and_the_block_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = EdgeStore(tmp_path / "store", DIM)
    calls = _flushed_tickets(store, monkeypatch)
    try:
        store.durable()  # outside a block nothing waits for a flush
        assert calls == []
        with store.together():
            store.upsert(Kind.FACTS, [_point(1)])
            store.durable()
            assert len(calls) == 1  # the first write, now
            store.upsert(Kind.FACTS, [_point(2)])
            store.durable()
            store.durable()  # nothing new since: no flush
            assert len(calls) == 2
            store.upsert(Kind.FACTS, [_point(3)])
        assert len(calls) == 3  # the last write, when the block ends
        assert calls == sorted(set(calls))
    finally:
        store.close()


def test_no_index_is_saved_while_a_write_to_its_space_waits_for_its_flush(
    tmp_path: Path,
) -> None:
    store = EdgeStore(tmp_path / "store", DIM)
    snapshots = store.snapshots
    assert snapshots is not None
    try:
        with store.together():
            store.upsert(Kind.FACTS, [_point(1)])
            generation = snapshots.generation("t", "s")
            assert not snapshots.save("t", "s", {"i": 1}, {"facts": 1}, generation)
            store.durable()
            generation = snapshots.generation("t", "s")
            assert snapshots.save("t", "s", {"i": 1}, {"facts": 1}, generation)
            store.upsert(Kind.FACTS, [_point(2)])
            generation = snapshots.generation("t", "s")
            assert not snapshots.save("t", "s", {"i": 2}, {"facts": 2}, generation)
        generation = snapshots.generation("t", "s")
        assert snapshots.save("t", "s", {"i": 2}, {"facts": 2}, generation)
    finally:
        store.close()


def _drained(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fail_flush: bool = False
) -> tuple[MemoryContext, Coordination, list[str | None]]:
    """A drain task run over a session of two parked facts; what happened, in order: each
    job state written, each flush waited for ("flush") and the next drain asked ("next")."""
    ctx = make_ctx(tmp_path)
    rec = session_record("s1", 0, WHEN, ["Ann"])
    coord = queued_head(ctx, rec, tmp_path / "c.sqlite")
    texts = ["Ann moved to Oslo.", "Ann adopted a cat."]
    drafts = [draft(rec, t, unit(1, i, 0, 0), ["k"], ["Ann"], index=i) for i, t in enumerate(texts)]
    body = {"drafts": [d.model_dump(mode="json") for d in drafts]}
    coord.chunks.put_chunk("t", "s", "s1", 0, 1, json.dumps(body))
    store = ctx.store
    assert isinstance(store, EdgeStore)
    happened: list[str | None] = []
    flushes, update = store._flushes.wait_durable, coord.jobs.update_job

    def flushed(ticket: int, flush: Callable[[], None]) -> None:
        happened.append("flush")
        if fail_flush:
            raise StoreFlushFailed("Input/output error (os error 5)")
        flushes(ticket, flush)

    def updated(tenant: str, job_id: str, **change: Any) -> Any:
        happened.append(change.get("state"))
        return update(tenant, job_id, **change)

    monkeypatch.setattr(store._flushes, "wait_durable", flushed)
    monkeypatch.setattr(coord.jobs, "update_job", updated)
    monkeypatch.setattr(runtime, "context", lambda: ctx)
    monkeypatch.setattr(runtime, "coordination", lambda: coord)
    monkeypatch.setattr(runtime, "settings", lambda: ctx.settings)
    monkeypatch.setattr(pipeline, "_request_drain", lambda tenant, space: happened.append("next"))
    pipeline._drain(SpacePayload(enqueued_at=0.0, tenant="t", space="s"))
    monkeypatch.undo()
    return ctx, coord, happened


def test_a_drain_commits_and_profiles_its_session_with_one_flush_before_the_job_is_done(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx, _, happened = _drained(tmp_path, monkeypatch)
    # the commit and its profile batch: one flush, and the job is done only after it
    assert happened == ["committing", "profiling", "flush", "done", "next"]
    stored = records.get_session(ctx.store, "t", "s", "s1")
    assert stored is not None and stored.status == "done"
    assert ctx.store.count(Kind.FACTS, "t", "s") == 2


def test_a_drain_whose_flush_fails_fails_its_job_and_the_space_moves_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, coord, happened = _drained(tmp_path, monkeypatch, fail_flush=True)
    assert happened == ["committing", "profiling", "flush", "failed", "next"]
    job = coord.jobs.get_job("t", "j1")
    assert job is not None and job.state == "failed"
    assert job.reason is not None and "writing to the store failed" in job.reason
    assert coord.sequence.head("t", "s") is None


def test_a_flush_failing_at_the_end_of_together_is_a_store_outage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = EdgeStore(tmp_path / "store", DIM)

    def failing(ticket: int, flush: object) -> None:
        raise StoreFlushFailed("No space left on device (os error 28)")

    try:
        store.upsert(Kind.FACTS, [_point(0)])
        monkeypatch.setattr(store._flushes, "wait_durable", failing)
        with pytest.raises(StoreUnavailable, match="try again later"), store.together():
            store.upsert(Kind.FACTS, [_point(1)])
    finally:
        monkeypatch.undo()
        store.close()


def test_callers_arriving_while_the_model_is_busy_share_one_encode() -> None:
    batches: list[list[str]] = []
    busy, release = threading.Event(), threading.Event()

    def encode(texts: list[str]) -> np.ndarray:
        batches.append(list(texts))
        if len(batches) == 1:
            busy.set()
            release.wait(10)
        return np.array([[float(len(t))] for t in texts], dtype=np.float32)

    shared = _Coalesced(encode)
    results: dict[str, np.ndarray] = {}

    def call(name: str, texts: list[str]) -> None:
        results[name] = shared.encode(texts)

    first = threading.Thread(target=call, args=("first", ["a"]))
    first.start()
    assert busy.wait(10)
    others = [
        threading.Thread(target=call, args=(f"c{i}", ["b" * (i + 2), "c" * (i + 5)]))
        for i in range(4)
    ]
    for t in others:
        t.start()
    while sum(len(a.texts) for a in shared._waiting) < 8:  # all four are queued
        threading.Event().wait(0.01)
    release.set()
    for t in [first, *others]:
        t.join(10)
    assert len(batches) == 2 and len(batches[1]) == 8  # the four callers in one encode
    for i in range(4):  # each caller got its own rows, in its order
        assert results[f"c{i}"][:, 0].tolist() == [i + 2, i + 5]
    assert results["first"][:, 0].tolist() == [1]


def test_an_encode_that_fails_fails_every_caller_it_carried() -> None:
    def encode(texts: list[str]) -> np.ndarray:
        raise RuntimeError("out of memory")

    with pytest.raises(RuntimeError, match="out of memory"):
        _Coalesced(encode).encode(["a"])


def test_followers_of_an_interrupted_leader_are_encoded_by_the_next_one() -> None:
    """A time limit or Ctrl-C in the leader's thread is its own: the callers whose texts it
    took wait for the next encode, and the model is free again."""
    busy, release = threading.Event(), threading.Event()
    batches: list[list[str]] = []

    def encode(texts: list[str]) -> np.ndarray:
        batches.append(list(texts))
        if len(batches) == 1:
            busy.set()
            release.wait(10)
        if len(batches) == 2:
            raise KeyboardInterrupt
        return np.array([[float(len(t))] for t in texts], dtype=np.float32)

    shared = _Coalesced(encode)
    results: dict[str, object] = {}

    def call(name: str, texts: list[str]) -> None:
        try:
            results[name] = shared.encode(texts)[:, 0].tolist()
        except BaseException as exc:  # noqa: BLE001 - recorded for the assertions
            results[name] = type(exc).__name__

    first = threading.Thread(target=call, args=("first", ["a"]))
    first.start()
    assert busy.wait(10)
    second = threading.Thread(target=call, args=("second", ["bb"]))
    second.start()
    while not shared._waiting:
        threading.Event().wait(0.01)
    third = threading.Thread(target=call, args=("third", ["ccc"]))
    third.start()
    while len(shared._waiting) < 2:
        threading.Event().wait(0.01)
    release.set()
    for t in (first, second, third):
        t.join(10)
    # the second batch (both followers) was interrupted in its leader's thread; the other
    # follower was encoded by a third batch of its own
    assert len(batches) == 3 and batches[1] == ["bb", "ccc"]
    interrupted, carried = ("second", "third") if batches[2] == ["ccc"] else ("third", "second")
    assert results[interrupted] == "KeyboardInterrupt"
    assert results[carried] == [float(len(batches[2][0]))]
    assert results["first"] == [1.0]
    assert not shared._busy and not shared._waiting


def test_a_commits_encode_goes_before_the_waiting_extraction() -> None:
    """Asks made `ahead` (a space's commit) take the model first when it frees: they wait
    for the encode under way, not for a backlog of extract chunks queued before them."""
    batches: list[list[str]] = []
    busy, release = threading.Event(), threading.Event()

    def encode(texts: list[str]) -> np.ndarray:
        batches.append(list(texts))
        if len(batches) == 1:
            busy.set()
            release.wait(10)
        return np.array([[float(len(t))] for t in texts], dtype=np.float32)

    shared = _Coalesced(encode)
    results: dict[str, list[float]] = {}

    def call(name: str, texts: list[str], first: bool = False) -> None:
        if first:
            with ahead():
                results[name] = shared.encode(texts)[:, 0].tolist()
        else:
            results[name] = shared.encode(texts)[:, 0].tolist()

    threads = [threading.Thread(target=call, args=("running", ["a"]))]
    threads[0].start()
    assert busy.wait(10)
    for name, texts, first in (
        ("chunk1", ["bb", "bb"], False),
        ("commit", ["cccc"], True),
        ("chunk2", ["ddd"], False),
    ):
        threads.append(threading.Thread(target=call, args=(name, texts, first)))
        threads[-1].start()
        while not any(a.texts == texts for a in shared._waiting):
            threading.Event().wait(0.01)
    release.set()
    for t in threads:
        t.join(10)
    # the commit's text alone next, then the extraction's together
    assert batches[1] == ["cccc"] and sorted(batches[2]) == ["bb", "bb", "ddd"]
    assert results == {"running": [1.0], "chunk1": [2.0, 2.0], "commit": [4.0], "chunk2": [3.0]}
    assert not shared._busy and not shared._waiting


def test_writers_whose_updates_one_failed_flush_lost_reload_the_store_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = EdgeStore(tmp_path / "store", DIM)
    store.upsert(Kind.FACTS, [_point(0)])
    reloads = 0
    reload = store._reload

    def counted(epoch: int | None = None) -> None:
        nonlocal reloads
        before = store._flushes.epoch
        reload(epoch)
        reloads += store._flushes.epoch - before

    monkeypatch.setattr(store, "_reload", counted)
    gate = threading.Barrier(3)
    real_flush = store._flushes.wait_durable

    def failing_flush(ticket: int, flush: Callable[[], None]) -> None:
        def broken() -> None:
            raise OSError(5, "Input/output error")

        real_flush(ticket, broken)

    monkeypatch.setattr(store._flushes, "wait_durable", failing_flush)
    errors: list[str] = []

    def write(i: int) -> None:
        try:
            with store.together():
                store.upsert(Kind.FACTS, [_point(i)])
                gate.wait(10)  # all three applied before any flushes
        except StoreUnavailable as exc:
            errors.append(str(exc))

    threads = [threading.Thread(target=write, args=(i,)) for i in (1, 2, 3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    monkeypatch.undo()
    try:
        assert len(errors) == 3  # none of them acknowledged
        assert reloads == 1  # and the shard loaded again once for the three
        # (what it holds now is what closing wrote: this disk did not really fail)
        assert "f0" in {p.id for p in store.scroll(Kind.FACTS, "t", "s")}
    finally:
        store.close()


class HeldSummaries(ScriptedBackend):
    """Event summaries of Ann's facts wait until the test releases them."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self.reached, self.release = threading.Event(), threading.Event()

    def summarize_events(
        self, items: list[tuple[list[FactView], EventSummary | None]]
    ) -> list[EventSummary]:
        if any(f.text.startswith("Ann") for facts, _ in items for f in facts):
            self.reached.set()
            self.release.wait(20)
        return super().summarize_events(items)


def test_a_commit_in_one_space_does_not_wait_for_another_spaces_commit(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    held = HeldSummaries(ctx.settings)
    ctx.backend = held
    held.links["Ann bought paint brushes."] = ["Ann paints landscapes."]
    records.create_space(ctx.store, "t", "s2")
    ann = session_record("a0", 0, WHEN, ["Ann"])
    bob = session_record("b0", 0, WHEN, ["Bob"]).model_copy(update={"space": "s2"})
    ann_drafts = [
        draft(ann, "Ann paints landscapes.", unit(1, 0, 0, 0), ["paints"], ["Ann"], index=0),
        draft(ann, "Ann bought paint brushes.", unit(0.7, 0.7, 0, 0), ["bought"], ["Ann"], 1),
    ]
    first = threading.Thread(target=commit_facts, args=(ctx, ann, ann_drafts))
    first.start()
    try:
        assert held.reached.wait(20)  # Ann's commit is mid-stage, in space s
        stats = commit_facts(
            ctx, bob, [draft(bob, "Bob runs marathons.", unit(0, 0, 1, 0), ["runs"], ["Bob"])]
        )
        assert stats.facts_stored == 1  # space s2 committed meanwhile
        assert ctx.store.count(Kind.FACTS, "t", "s") == 0  # s has not written yet
    finally:
        held.release.set()
        first.join(20)
    assert ctx.store.count(Kind.FACTS, "t", "s") == 2
