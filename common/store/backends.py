"""The configured store: a Qdrant server when a URL is set, else Qdrant Edge in-process."""

from __future__ import annotations

from common.settings import StoreSettings
from common.store.base import Store


def open_store(settings: StoreSettings, dimension: int) -> Store:
    """The store the settings name; nothing is opened until its first call."""
    if settings.qdrant_url:
        from common.store.qdrant import QdrantStore

        return QdrantStore(settings, dimension)
    from common.store.edge import EdgeStore

    return EdgeStore(settings.qdrant_path, dimension, settings.scroll_page)
