"""The server store: a Qdrant server through qdrant-client, one collection per kind, every
read and write filtered by tenant and space. The embedded default is `common.store.edge`."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

import numpy as np
from qdrant_client import QdrantClient, models

from common.settings import StoreSettings
from common.store.base import (
    DATETIME_FIELDS,
    KEYWORD_FIELDS,
    VECTOR_KINDS,
    Kind,
    Point,
    StoreError,
    check_scoped,
    in_asked_order,
)
from common.store.snapshots import IndexSnapshots

_LOCK = threading.RLock()


class QdrantStore:
    """Collections for facts, events, profiles, raw sessions and spaces on a server."""

    # Many processes share a server: each builds its indexes from it, none saves them.
    snapshots: IndexSnapshots | None = None

    def __init__(self, settings: StoreSettings, dimension: int) -> None:
        if not settings.qdrant_url:
            raise ValueError("QdrantStore needs a server URL (settings.store.qdrant_url)")
        self._settings = settings
        self._dimension = dimension
        self._opened: QdrantClient | None = None

    @property
    def location(self) -> str:
        return str(self._settings.qdrant_url)

    @property
    def _client(self) -> QdrantClient:
        """The client, connected on first use."""
        with _LOCK:
            if self._opened is None:
                cfg = self._settings
                key = cfg.qdrant_api_key.get_secret_value() if cfg.qdrant_api_key else None
                # no version probe: it runs in a thread of its own and only warns; the
                # deployment files pin the server within one minor version of the client
                self._opened = QdrantClient(
                    url=cfg.qdrant_url, api_key=key, check_compatibility=False
                )
                self._ensure_collections(self._opened)
            return self._opened

    @contextmanager
    def _calls(self) -> Iterator[None]:
        """A server call: its failures become one StoreError naming the server. The client
        (HTTP) is safe to share between threads, so no lock is held."""
        try:
            yield
        except (StoreError, ValueError):
            raise
        except Exception as exc:  # qdrant-client raises several unrelated types
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise StoreError(f"the Qdrant server at {self.location} failed: {first}") from exc

    def name(self, kind: Kind) -> str:
        return f"{self._settings.collection_prefix}_{kind.value}"

    def _ensure_collections(self, client: QdrantClient) -> None:
        for kind in Kind:
            name = self.name(kind)
            if client.collection_exists(name):
                continue
            vectors: models.VectorParams | dict[str, models.VectorParams] = {}
            if kind in VECTOR_KINDS:
                vectors = models.VectorParams(size=self._dimension, distance=models.Distance.COSINE)
            client.create_collection(name, vectors_config=vectors)
            client.create_payload_index(
                name,
                "tenant",
                models.KeywordIndexParams(type=models.KeywordIndexType.KEYWORD, is_tenant=True),
            )
            client.create_payload_index(name, "space", models.PayloadSchemaType.KEYWORD)
            for field in KEYWORD_FIELDS[kind]:
                client.create_payload_index(name, field, models.PayloadSchemaType.KEYWORD)
            for field in DATETIME_FIELDS.get(kind, ()):
                client.create_payload_index(name, field, models.PayloadSchemaType.DATETIME)

    @staticmethod
    def _scope(tenant: str, space: str | None) -> models.Filter:
        must: list[models.Condition] = [
            models.FieldCondition(key="tenant", match=models.MatchValue(value=tenant))
        ]
        if space is not None:
            must.append(models.FieldCondition(key="space", match=models.MatchValue(value=space)))
        return models.Filter(must=must)

    def write(self, points: Sequence[tuple[Kind, Point]]) -> None:
        """Kind by kind (one collection each), in the order the kinds first appear."""
        groups: dict[Kind, list[Point]] = {}
        for kind, point in points:
            groups.setdefault(kind, []).append(point)
        for kind, group in groups.items():
            self.upsert(kind, group)

    def together(self) -> AbstractContextManager[None]:
        """Nothing to group: each write waits for the server (`wait=True`)."""
        return nullcontext()

    def durable(self) -> None:
        """Nothing pending: each write waited for the server."""

    def upsert(self, kind: Kind, points: Sequence[Point]) -> None:
        """Write points; every payload must name its tenant and space."""
        structs = []
        for point in points:
            check_scoped(kind, point)
            vector: list[float] | dict[str, Any] = (
                point.vector.astype(float).tolist() if point.vector is not None else {}
            )
            structs.append(models.PointStruct(id=point.id, vector=vector, payload=point.payload))
        step = self._settings.upsert_batch
        with self._calls():
            for i in range(0, len(structs), step):
                self._client.upsert(self.name(kind), points=structs[i : i + step], wait=True)

    def delete(self, kind: Kind, tenant: str, space: str, ids: Sequence[str]) -> None:
        """Delete points by id, only within the tenant's space."""
        if not ids:
            return
        selector = models.Filter(
            must=[*self._scope(tenant, space).must, models.HasIdCondition(has_id=list(ids))]  # type: ignore[misc]
        )
        with self._calls():
            self._client.delete(
                self.name(kind), points_selector=models.FilterSelector(filter=selector)
            )

    def delete_scope(self, kind: Kind, tenant: str, space: str) -> None:
        """Delete every point of the tenant's space."""
        with self._calls():
            self._client.delete(
                self.name(kind),
                points_selector=models.FilterSelector(filter=self._scope(tenant, space)),
            )

    def scroll(
        self, kind: Kind, tenant: str, space: str | None, with_vectors: bool = False
    ) -> Iterator[Point]:
        """Every point of a tenant (and space), page by page."""
        offset: Any = None
        while True:
            with self._calls():
                records, offset = self._client.scroll(
                    self.name(kind),
                    scroll_filter=self._scope(tenant, space),
                    limit=self._settings.scroll_page,
                    offset=offset,
                    with_payload=True,
                    with_vectors=with_vectors,
                )
            for record in records:
                vector = None
                if with_vectors and record.vector is not None:
                    vector = np.asarray(record.vector, dtype=np.float32)
                yield Point(id=str(record.id), payload=record.payload or {}, vector=vector)
            if offset is None:
                return

    def retrieve(
        self, kind: Kind, tenant: str, space: str, ids: Sequence[str], with_vectors: bool = False
    ) -> list[Point]:
        """Points by id, dropping any that belong to another tenant or space."""
        if not ids:
            return []
        with self._calls():
            records = self._client.retrieve(
                self.name(kind), ids=list(ids), with_payload=True, with_vectors=with_vectors
            )
        out = []
        for record in records:
            payload = record.payload or {}
            if payload.get("tenant") != tenant or payload.get("space") != space:
                continue
            vector = None
            if with_vectors and record.vector is not None:
                vector = np.asarray(record.vector, dtype=np.float32)
            out.append(Point(id=str(record.id), payload=payload, vector=vector))
        return in_asked_order(out, ids)

    def count(self, kind: Kind, tenant: str, space: str | None) -> int:
        with self._calls():
            result = self._client.count(
                self.name(kind), count_filter=self._scope(tenant, space), exact=True
            )
        return int(result.count)

    def compact(self) -> None:
        """Nothing to do here: the server's own optimisers vacuum deleted points."""

    def close(self) -> None:
        with _LOCK:
            if self._opened is not None:
                self._opened.close()
                self._opened = None
