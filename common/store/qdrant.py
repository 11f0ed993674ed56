"""Qdrant adapter: one collection per kind, every read and write filtered by tenant and space.

Local mode (`path=`) is the embedded default; a server URL is the scale-out path with the
same code. The client is not thread-safe in local mode, so every call holds one lock.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import numpy as np
from qdrant_client import QdrantClient, models

from common.settings import StoreSettings

_LOCK = threading.RLock()


class Kind(StrEnum):
    FACTS = "facts"
    EVENTS = "events"
    PROFILES = "profiles"
    SESSIONS = "sessions"
    SPACES = "spaces"


VECTOR_KINDS = (Kind.FACTS, Kind.EVENTS, Kind.PROFILES)

# Payload fields indexed per kind (tenant index flagged as such for multitenancy).
_INDEXES: dict[Kind, dict[str, models.PayloadSchemaType]] = {
    Kind.FACTS: {
        "participants": models.PayloadSchemaType.KEYWORD,
        "keywords": models.PayloadSchemaType.KEYWORD,
        "source.session_id": models.PayloadSchemaType.KEYWORD,
        "time.session": models.PayloadSchemaType.DATETIME,
    },
    Kind.EVENTS: {
        "participants": models.PayloadSchemaType.KEYWORD,
        "keywords": models.PayloadSchemaType.KEYWORD,
    },
    Kind.PROFILES: {"person": models.PayloadSchemaType.KEYWORD},
    Kind.SESSIONS: {"session.session_id": models.PayloadSchemaType.KEYWORD},
    Kind.SPACES: {},
}


@dataclass(frozen=True)
class Point:
    id: str
    payload: dict[str, Any]
    vector: np.ndarray | None = None


class QdrantStore:
    """Collections for facts, events, profiles, raw sessions and spaces."""

    def __init__(self, settings: StoreSettings, dimension: int) -> None:
        self._settings = settings
        self._dimension = dimension
        self.local = settings.qdrant_url is None
        self._opened: QdrantClient | None = None

    @property
    def _client(self) -> QdrantClient:
        """The client, opened on first use: a process that never touches the store (an
        extract worker) never takes local mode's one-process lock."""
        with _LOCK:
            if self._opened is None:
                cfg = self._settings
                if cfg.qdrant_url:
                    key = cfg.qdrant_api_key.get_secret_value() if cfg.qdrant_api_key else None
                    self._opened = QdrantClient(url=cfg.qdrant_url, api_key=key)
                else:
                    cfg.qdrant_path.mkdir(parents=True, exist_ok=True)
                    self._opened = QdrantClient(path=str(cfg.qdrant_path))
                self._ensure_collections(self._opened)
            return self._opened

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
            if self.local:
                continue  # payload indexes have no effect in local mode
            client.create_payload_index(
                name,
                "tenant",
                models.KeywordIndexParams(type=models.KeywordIndexType.KEYWORD, is_tenant=True),
            )
            client.create_payload_index(name, "space", models.PayloadSchemaType.KEYWORD)
            for field, schema in _INDEXES[kind].items():
                client.create_payload_index(name, field, schema)

    @staticmethod
    def _scope(tenant: str, space: str | None) -> models.Filter:
        must: list[models.Condition] = [
            models.FieldCondition(key="tenant", match=models.MatchValue(value=tenant))
        ]
        if space is not None:
            must.append(models.FieldCondition(key="space", match=models.MatchValue(value=space)))
        return models.Filter(must=must)

    def upsert(self, kind: Kind, points: Sequence[Point]) -> None:
        """Write points; every payload must name its tenant and space."""
        structs = []
        for point in points:
            if "tenant" not in point.payload or "space" not in point.payload:
                raise ValueError(f"{kind} point {point.id} lacks tenant/space in its payload")
            vector: list[float] | dict[str, Any] = (
                point.vector.astype(float).tolist() if point.vector is not None else {}
            )
            structs.append(models.PointStruct(id=point.id, vector=vector, payload=point.payload))
        step = self._settings.upsert_batch
        with _LOCK:
            for i in range(0, len(structs), step):
                self._client.upsert(self.name(kind), points=structs[i : i + step], wait=True)

    def delete(self, kind: Kind, tenant: str, space: str, ids: Sequence[str]) -> None:
        """Delete points by id, only within the tenant's space."""
        if not ids:
            return
        selector = models.Filter(
            must=[*self._scope(tenant, space).must, models.HasIdCondition(has_id=list(ids))]  # type: ignore[misc]
        )
        with _LOCK:
            self._client.delete(
                self.name(kind), points_selector=models.FilterSelector(filter=selector)
            )

    def delete_scope(self, kind: Kind, tenant: str, space: str) -> None:
        """Delete every point of the tenant's space."""
        with _LOCK:
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
            with _LOCK:
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
        with _LOCK:
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
        return out

    def count(self, kind: Kind, tenant: str, space: str | None) -> int:
        with _LOCK:
            result = self._client.count(
                self.name(kind), count_filter=self._scope(tenant, space), exact=True
            )
        return int(result.count)

    def close(self) -> None:
        with _LOCK:
            if self._opened is not None:
                self._opened.close()
                self._opened = None
