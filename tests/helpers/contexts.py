"""A memory context on a local store in a test's directory, closed after the test
(tests/conftest.py closes what `OPEN_STORES` holds)."""

from __future__ import annotations

from pathlib import Path

from common.context import MemoryContext
from common.llm.rules import RulesBackend
from common.settings import EmbeddingSettings, Settings, StoreSettings
from common.store import records
from common.store.backends import open_store
from common.store.base import Store
from tests.helpers.doubles import DIM, ScriptedBackend, TableEncoder

OPEN_STORES: list[Store] = []


def make_ctx(
    tmp_path: Path, encoder: TableEncoder | None = None, scripted: bool = True
) -> MemoryContext:
    settings = Settings(
        store=StoreSettings(qdrant_path=tmp_path / "qdrant"),
        embedding=EmbeddingSettings(dimension=DIM),
    )
    backend = (
        ScriptedBackend(settings) if scripted else RulesBackend(settings.rules, settings.memory)
    )
    ctx = MemoryContext(
        settings=settings,
        store=open_store(settings.store, DIM),
        embedder=encoder or TableEncoder(),
        backend=backend,
    )
    OPEN_STORES.append(ctx.store)
    records.create_space(ctx.store, "t", "s")
    return ctx
