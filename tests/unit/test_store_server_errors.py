"""The server store turns qdrant-client's failures into one StoreError naming the server."""

from __future__ import annotations

import pytest

from common.settings import StoreSettings
from common.store.base import Kind, StoreError
from common.store.qdrant import QdrantStore
from tests.helpers.ports import free_port


def test_an_unreachable_server_is_a_store_error_naming_it() -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    store = QdrantStore(StoreSettings(qdrant_url=url), 4)
    with pytest.raises(StoreError, match=f"the Qdrant server at {url} failed"):
        store.count(Kind.FACTS, "t", "s")
    with pytest.raises(StoreError, match=url):
        list(store.scroll(Kind.FACTS, "t", "s"))


def test_the_server_store_needs_a_url() -> None:
    with pytest.raises(ValueError, match="needs a server URL"):
        QdrantStore(StoreSettings(), 4)
