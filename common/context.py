"""What construction functions need, passed in: settings, store, embedder, backend, indexes."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from common.llm.base import LLMBackend
from common.settings import Settings
from common.store.base import Kind, Store
from common.store.coordination.versions import VersionCounter
from common.store.space_index import SpaceIndex, SpaceIndexCache

log = logging.getLogger(__name__)

INDEXED_KINDS = (Kind.FACTS, Kind.EVENTS, Kind.PROFILES)


class TextEncoder(Protocol):
    dimension: int

    def encode(self, texts: list[str]) -> np.ndarray: ...


def _stored_counts(store: Store, tenant: str, space: str) -> dict[str, int]:
    return {kind.value: store.count(kind, tenant, space) for kind in INDEXED_KINDS}


def _index_counts(index: SpaceIndex) -> dict[str, int]:
    return {
        Kind.FACTS.value: len(index.facts),
        Kind.EVENTS.value: len(index.events),
        Kind.PROFILES.value: len(index.profiles),
    }


@dataclass
class MemoryContext:
    settings: Settings
    store: Store
    embedder: TextEncoder
    backend: LLMBackend
    indexes: SpaceIndexCache = field(default_factory=SpaceIndexCache)
    versions: VersionCounter | None = None
    # Runs on an index just before it is saved: the recall graph's channels are built then
    # and saved with it, so the next process's first query does not build them (seconds on
    # a 100k-fact space). Set by workers.wiring.build_context.
    before_save: Callable[[SpaceIndex], None] | None = None
    # When each large space's index was last saved, and those changed since (embedded store).
    _saved_at: dict[tuple[str, str], float] = field(default_factory=dict, init=False, repr=False)
    # how long the last save of each space's index took (`_save_if_due` spaces them out)
    _save_took: dict[tuple[str, str], float] = field(default_factory=dict, init=False, repr=False)
    _unsaved: set[tuple[str, str]] = field(default_factory=set, init=False, repr=False)
    # Spaces whose index a stage or an erasure is changing ahead of its writes.
    _changing: dict[tuple[str, str], int] = field(default_factory=dict, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def index(self, tenant: str, space: str) -> SpaceIndex:
        """The space's index, reloaded from the store when another writer moved its version."""
        current = self.versions.version(tenant, space) if self.versions else None
        index = self.indexes.get(tenant, space)
        if index is None or (current is not None and index.version != current):
            index = self._open_index(tenant, space)
            index.version = current or 0
            self.indexes.put(index)
        return index

    def held_index(self, tenant: str, space: str) -> SpaceIndex | None:
        """The space's index if this process holds it up to date; never reads the store."""
        index = self.indexes.get(tenant, space)
        if index is None:
            return None
        if self.versions is not None and index.version != self.versions.version(tenant, space):
            return None
        return index

    @contextmanager
    def changing(self, tenant: str, space: str) -> Iterator[None]:
        """Around a stage or an erasure, which changes the space's index before its writes
        land: no saved copy of the index is taken meanwhile, and if it fails the index is
        dropped (it may hold half the change) and read again next time."""
        key = (tenant, space)
        with self._lock:
            self._changing[key] = self._changing.get(key, 0) + 1
        try:
            yield
        except BaseException:
            self.indexes.drop(tenant, space)
            raise
        finally:
            with self._lock:
                left = self._changing.pop(key) - 1
                if left:
                    self._changing[key] = left

    def _open_index(self, tenant: str, space: str) -> SpaceIndex:
        """The saved index where the store keeps one that matches it, else read the store
        (and save what was read when the space is large, for the next process)."""
        snapshots = self.store.snapshots
        dimension = self.embedder.dimension
        if snapshots is None:
            return SpaceIndex.load(self.store, tenant, space, dimension)
        generation = snapshots.generation(tenant, space)
        counts = _stored_counts(self.store, tenant, space)
        saved = snapshots.load(tenant, space, counts)
        if isinstance(saved, SpaceIndex) and saved.dimension == dimension:
            self._saved_at[(tenant, space)] = time.monotonic()
            return saved
        index = SpaceIndex.load(self.store, tenant, space, dimension)
        if len(index.facts) >= self.settings.store.index_snapshot_min_facts:
            self._save(index, counts, generation)
        return index

    def _save(self, index: SpaceIndex, counts: dict[str, int], generation: int) -> None:
        snapshots = self.store.snapshots
        key = (index.tenant, index.space)
        if snapshots is None or counts != _index_counts(index):
            return  # never save an index that does not match the store
        began = time.monotonic()
        try:
            if self.before_save is not None:
                self.before_save(index)
            saved = snapshots.save(index.tenant, index.space, index, counts, generation)
        except Exception as exc:  # a saved copy is an optimisation: never fail the caller
            log.warning("could not save the index of space %r: %s", index.space, exc)
            return
        if not saved:  # written meanwhile, or not flushed yet: the next chance saves it
            self._unsaved.add(key)
            return
        self._saved_at[key] = time.monotonic()
        self._save_took[key] = self._saved_at[key] - began
        self._unsaved.discard(key)

    def _save_if_due(self, index: SpaceIndex, force: bool = False) -> None:
        snapshots = self.store.snapshots
        cfg = self.settings.store
        if snapshots is None or len(index.facts) < cfg.index_snapshot_min_facts:
            return
        key = (index.tenant, index.space)
        with self._lock:
            busy = key in self._changing
        if busy:  # a stage or an erasure is ahead of the store: save once it is done
            self._unsaved.add(key)
            return
        last = self._saved_at.get(key)
        # A save pickles the whole index: the larger the space, the longer between saves, so
        # that saving takes at most `index_snapshot_max_share` of the time.
        interval = max(
            cfg.index_snapshot_interval_s,
            self._save_took.get(key, 0.0) / cfg.index_snapshot_max_share,
        )
        if not force and last is not None and time.monotonic() - last < interval:
            self._unsaved.add(key)
            return
        generation = snapshots.generation(index.tenant, index.space)
        try:
            counts = _stored_counts(self.store, index.tenant, index.space)
        except Exception as exc:  # the stage's writes landed; a count failing must not undo it
            log.warning("could not save the index of space %r: %s", index.space, exc)
            return
        self._save(index, counts, generation)

    def committed(self, index: SpaceIndex) -> None:
        """A stage's writes are in the store: move the space's version past them."""
        if self.versions is None:
            index.version += 1
        else:
            index.version = self.versions.bump_version(index.tenant, index.space)
        self._save_if_due(index)

    def durable(self, tenant: str, space: str) -> None:
        """This thread's writes so far are on disk (`Store.durable`); then the space's index
        is saved if it is due, which a stage inside a `together()` could not do before."""
        self.store.durable()
        index = self.indexes.get(tenant, space)
        if index is not None and (tenant, space) in self._unsaved:
            self._save_if_due(index)

    def close(self) -> None:
        """Save the indexes of large spaces changed since their last save, close the store."""
        try:
            for tenant, space in sorted(self._unsaved):
                index = self.indexes.get(tenant, space)
                if index is not None:
                    self._save_if_due(index, force=True)
        finally:
            self.store.close()
