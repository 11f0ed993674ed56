"""What construction functions need, passed in: settings, store, embedder, backend, indexes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from common.llm.base import LLMBackend
from common.settings import Settings
from common.store.base import Store
from common.store.coordination.versions import VersionCounter
from common.store.space_index import SpaceIndex, SpaceIndexCache


class TextEncoder(Protocol):
    dimension: int

    def encode(self, texts: list[str]) -> np.ndarray: ...


@dataclass
class MemoryContext:
    settings: Settings
    store: Store
    embedder: TextEncoder
    backend: LLMBackend
    indexes: SpaceIndexCache = field(default_factory=SpaceIndexCache)
    versions: VersionCounter | None = None

    def index(self, tenant: str, space: str) -> SpaceIndex:
        """The space's index, reloaded from the store when another writer moved its version."""
        current = self.versions.version(tenant, space) if self.versions else None
        index = self.indexes.get(tenant, space)
        if index is None or (current is not None and index.version != current):
            index = SpaceIndex.load(self.store, tenant, space, self.embedder.dimension)
            index.version = current or 0
            self.indexes.put(index)
        return index

    def committed(self, index: SpaceIndex) -> None:
        """A stage's writes are in the store: move the space's version past them."""
        if self.versions is None:
            index.version += 1
        else:
            index.version = self.versions.bump_version(index.tenant, index.space)
