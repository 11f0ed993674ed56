"""What construction functions need, passed in: settings, store, embedder, backend, indexes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from common.llm.base import LLMBackend
from common.settings import Settings
from common.store.qdrant import QdrantStore
from common.store.space_index import SpaceIndex, SpaceIndexCache


class TextEncoder(Protocol):
    dimension: int

    def encode(self, texts: list[str]) -> np.ndarray: ...


@dataclass
class MemoryContext:
    settings: Settings
    store: QdrantStore
    embedder: TextEncoder
    backend: LLMBackend
    indexes: SpaceIndexCache = field(default_factory=SpaceIndexCache)

    def index(self, tenant: str, space: str) -> SpaceIndex:
        """The space's index, loaded from the store on first use."""
        index = self.indexes.get(tenant, space)
        if index is None:
            index = SpaceIndex.load(self.store, tenant, space, self.embedder.dimension)
            self.indexes.put(index)
        return index
