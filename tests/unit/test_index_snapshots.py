"""Saved space indexes (common/store/snapshots.py): used only while they match the store."""

from __future__ import annotations

import pickle
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from common.context import MemoryContext
from common.memory.commit import commit_facts
from common.retrieval.graph import channels
from common.store.backends import open_store
from common.store.base import Kind
from common.store.snapshots import IndexSnapshots
from common.store.space_index import SpaceIndex, SpaceIndexCache
from tests.helpers.contexts import OPEN_STORES, make_ctx
from tests.helpers.doubles import TableEncoder, unit
from tests.helpers.records import draft, session_record

WHEN = datetime(2024, 3, 1, 12, 0)


def _small_snapshots(ctx: MemoryContext) -> MemoryContext:
    store = ctx.settings.store.model_copy(
        update={"index_snapshot_min_facts": 1, "index_snapshot_interval_s": 3600.0}
    )
    ctx.settings = ctx.settings.model_copy(update={"store": store})

    def build_channels(index: SpaceIndex) -> None:
        channels(index, ctx.settings.graph)

    ctx.before_save = build_channels
    return ctx


def _commit(ctx: MemoryContext, session: str, seq: int, texts: list[str]) -> None:
    record = session_record(session, seq, WHEN, ["Ann"])
    rng = np.random.default_rng(seq)
    drafts = [
        draft(record, text, unit(*rng.random(4)), [text.split()[1].lower()], ["Ann"], index=i)
        for i, text in enumerate(texts)
    ]
    commit_facts(ctx, record, drafts)


def _reopen(ctx: MemoryContext) -> MemoryContext:
    """What a fresh process gets: the same store directory, no index in memory."""
    ctx.close()
    OPEN_STORES.remove(ctx.store)
    fresh = replace(ctx, store=open_store(ctx.settings.store, 4), indexes=SpaceIndexCache())
    OPEN_STORES.append(fresh.store)
    return _small_snapshots(fresh)


def _same(a: SpaceIndex, b: SpaceIndex) -> None:
    """The same records and vectors (rows may come in another order)."""
    for kind in ("facts", "events", "profiles"):
        left, right = getattr(a, kind), getattr(b, kind)
        assert sorted(r.id for r in left.items()) == sorted(r.id for r in right.items())
        for record in left.items():
            assert record == right.get(record.id)
            assert np.array_equal(left.vector(record.id), right.vector(record.id))


def test_a_fresh_process_uses_the_saved_index_and_it_equals_the_store(tmp_path: Path) -> None:
    ctx = _small_snapshots(make_ctx(tmp_path, TableEncoder(), scripted=False))
    _commit(ctx, "s1", 1, ["Ann paints landscapes.", "Ann likes tea."])
    snapshots = ctx.store.snapshots
    assert snapshots is not None
    saved = snapshots.path("t", "s")
    assert saved.exists()  # the first commit of a space past the size saves it
    fresh = _reopen(ctx)
    loaded = fresh.index("t", "s")
    # the saved copy carries the recall graph's channels, built before it was written
    assert any(name == "graph-channels" for name in loaded._derived)
    _same(loaded, SpaceIndex.load(fresh.store, "t", "s", 4))


def test_a_write_deletes_the_saved_index_before_it_changes_the_store(tmp_path: Path) -> None:
    ctx = _small_snapshots(make_ctx(tmp_path, TableEncoder(), scripted=False))
    _commit(ctx, "s1", 1, ["Ann paints landscapes."])
    snapshots = ctx.store.snapshots
    assert snapshots is not None
    saved = snapshots.path("t", "s")
    assert saved.exists()
    seen: list[bool] = []
    real_check = ctx.store._check_writable  # type: ignore[attr-defined]

    def check(doing: str) -> None:  # run just before each engine update
        seen.append(saved.exists())
        real_check(doing)

    ctx.store._check_writable = check  # type: ignore[attr-defined]
    _commit(ctx, "s2", 2, ["Ann rows boats."])
    # the plan's write (a session record) leaves the copy; the points' write never finds it
    assert seen == [True, False]
    # the interval has not passed: nothing saved until the store closes
    assert not saved.exists()
    fresh = _reopen(ctx)
    assert saved.exists()
    assert len(fresh.index("t", "s").facts) == 2


def test_a_space_whose_save_takes_long_is_saved_less_often(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx = _small_snapshots(make_ctx(tmp_path, TableEncoder(), scripted=False))
    store = ctx.settings.store.model_copy(
        update={"index_snapshot_interval_s": 0.0, "index_snapshot_max_share": 0.05}
    )
    ctx.settings = ctx.settings.model_copy(update={"store": store})
    clock = [1000.0]
    monkeypatch.setattr("common.context.time", SimpleNamespace(monotonic=lambda: clock[0]))
    build = ctx.before_save
    assert build is not None

    def slow_save(index: SpaceIndex) -> None:  # each save takes 10 s on this clock
        build(index)
        clock[0] += 10.0

    ctx.before_save = slow_save
    snapshots = ctx.store.snapshots
    assert snapshots is not None
    saved = snapshots.path("t", "s")
    _commit(ctx, "s1", 1, ["Ann paints landscapes."])
    assert saved.exists()
    clock[0] += 150.0  # 10 s of saving may come once per 200 s (5%), not per interval (0 s)
    _commit(ctx, "s2", 2, ["Ann rows boats."])
    assert not saved.exists()
    clock[0] += 60.0
    _commit(ctx, "s3", 3, ["Ann bakes bread."])
    assert saved.exists()
    assert len(_reopen(ctx).index("t", "s").facts) == 3


def test_a_saved_index_that_does_not_match_the_store_is_ignored(tmp_path: Path) -> None:
    ctx = _small_snapshots(make_ctx(tmp_path, TableEncoder(), scripted=False))
    _commit(ctx, "s1", 1, ["Ann paints landscapes.", "Ann likes tea."])
    snapshots = ctx.store.snapshots
    assert snapshots is not None
    path = snapshots.path("t", "s")
    with open(path, "rb") as handle:
        header = pickle.load(handle)
        index = pickle.load(handle)
    # a copy claiming other counts (e.g. written before a crash lost the write) is not used
    index.facts.remove(index.facts.ids[0])
    with open(path, "wb") as handle:
        pickle.dump({**header, "counts": {**header["counts"], "facts": 1}}, handle)
        pickle.dump(index, handle)
    fresh = _reopen(ctx)
    assert len(fresh.index("t", "s").facts) == 2


def test_a_saved_index_from_other_code_is_ignored(tmp_path: Path) -> None:
    snapshots = IndexSnapshots(tmp_path)
    index = SpaceIndex(tenant="t", space="s", dimension=4)
    counts = {"facts": 0, "events": 0, "profiles": 0}
    assert snapshots.save("t", "s", index, counts, snapshots.generation("t", "s"))
    assert isinstance(snapshots.load("t", "s", counts), SpaceIndex)
    other = IndexSnapshots(tmp_path)
    other._stamp = "another release"
    assert other.load("t", "s", counts) is None
    path = snapshots.path("t", "s")
    path.write_bytes(b"not a pickle")
    assert IndexSnapshots(tmp_path).load("t", "s", counts) is None


def test_an_index_read_while_the_space_was_written_is_not_saved(tmp_path: Path) -> None:
    snapshots = IndexSnapshots(tmp_path)
    index = SpaceIndex(tenant="t", space="s", dimension=4)
    counts = {"facts": 0, "events": 0, "profiles": 0}
    before = snapshots.generation("t", "s")
    snapshots.invalidate("t", "s")  # a write came while the index was being read
    assert not snapshots.save("t", "s", index, counts, before)
    assert not snapshots.path("t", "s").exists()


@pytest.mark.parametrize("size", [1, 3])
def test_small_spaces_keep_no_saved_index(tmp_path: Path, size: int) -> None:
    ctx = make_ctx(tmp_path, TableEncoder(), scripted=False)  # default: 2,000 facts and up
    _commit(ctx, "s1", 1, [f"Ann paints picture {i}." for i in range(size)])
    assert ctx.store.count(Kind.FACTS, "t", "s") == size
    assert ctx.store.snapshots is not None
    assert not ctx.store.snapshots.path("t", "s").exists()


def test_an_index_read_during_a_write_is_not_saved(tmp_path: Path) -> None:
    """The generation moves again once a write ends: a reader that took it while the write
    was under way (after the copy was deleted, before the points landed) may not save."""
    snapshots = IndexSnapshots(tmp_path)
    index = SpaceIndex(tenant="t", space="s", dimension=4)
    counts = {"facts": 0, "events": 0, "profiles": 0}
    snapshots.invalidate("t", "s")  # a write begins
    during = snapshots.generation("t", "s")
    snapshots.written("t", "s")  # and ends
    assert not snapshots.save("t", "s", index, counts, during)


def test_a_damaged_saved_index_is_dropped_and_the_store_read(tmp_path: Path) -> None:
    snapshots = IndexSnapshots(tmp_path)
    index = SpaceIndex(tenant="t", space="s", dimension=4)
    counts = {"facts": 0, "events": 0, "profiles": 0}
    assert snapshots.save("t", "s", index, counts, snapshots.generation("t", "s"))
    path = snapshots.path("t", "s")
    with open(path, "rb") as handle:
        header = pickle.load(handle)
    with open(path, "wb") as handle:
        pickle.dump(header, handle)
        handle.write(b"\x80\x05garbage")  # a truncated or damaged index after a good header
    assert IndexSnapshots(tmp_path).load("t", "s", counts) is None
    assert not path.exists()


def test_no_copy_is_saved_while_a_stage_changes_the_index(tmp_path: Path) -> None:
    ctx = _small_snapshots(make_ctx(tmp_path, TableEncoder(), scripted=False))
    _commit(ctx, "s1", 1, ["Ann paints landscapes."])
    snapshots = ctx.store.snapshots
    assert snapshots is not None
    path = snapshots.path("t", "s")
    path.unlink()
    index = ctx.index("t", "s")
    with ctx.changing("t", "s"):
        ctx._save_if_due(index, force=True)  # e.g. the store closing mid-stage
        assert not path.exists()
    ctx._save_if_due(index, force=True)
    assert path.exists()


def test_an_index_read_frozen_for_the_collector_is_freed_once_dropped(tmp_path: Path) -> None:
    """An index is built with the cyclic collector paused and then frozen out of its reach
    (common/store/longlived.py): it must hold no reference cycle, or dropping it would leak
    it. Read from a saved copy and from the store alike, the last reference frees it."""
    import gc
    import weakref

    ctx = _small_snapshots(make_ctx(tmp_path, TableEncoder(), scripted=False))
    _commit(ctx, "s1", 1, ["Ann paints landscapes.", "Ann likes tea.", "Ann bought a kiln."])
    fresh = _reopen(ctx)
    loaded = fresh.index("t", "s")  # from the saved copy
    read = SpaceIndex.load(fresh.store, "t", "s", 4)
    assert gc.get_freeze_count() > 0
    refs: list[weakref.ref[object]] = [
        weakref.ref(loaded),
        weakref.ref(read),
        weakref.ref(loaded.facts),
    ]
    fresh.indexes.drop("t", "s")
    del loaded, read
    assert all(ref() is None for ref in refs)
