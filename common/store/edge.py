"""The embedded store: one Qdrant Edge shard in this process, every kind in it.

Qdrant Edge is Qdrant's own engine (segments, payload indexes, write-ahead log) linked into
the process. All kinds share one shard, told apart by a `_kind` payload field, so that a
commit stage's points (facts, events, profiles and the session record) go to the engine as
one update: one write-ahead log entry, applied whole or replayed whole after a crash. Point
ids are derived from the kind and the record id, so records of different kinds never share
an id; the record id travels in the payload (`_id`) and both fields are removed on read.

Layout of the store directory:
  atommem-store.json   format marker: store format, engine and its version, vector size
  owner.lock           held (flock) by the owning process, which writes who it is into it
  shard/               the Edge shard (edge_config.json, segments/, wal/)

One process owns the directory. Edge's calls are safe from several threads at once (a test
runs reads, writes, scrolls and deletes from threads with no lock of ours), so the only lock
here guards opening and closing.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from importlib import metadata
from pathlib import Path
from typing import IO, Any

import numpy as np
import qdrant_edge as qe

from common.store.base import (
    DATETIME_FIELDS,
    KEYWORD_FIELDS,
    Kind,
    Point,
    StoreBusy,
    StoreError,
    StoreFormatError,
    check_scoped,
)

FORMAT = 1
ENGINE = "qdrant-edge"
MARKER = "atommem-store.json"
OWNER = "owner.lock"
SHARD = "shard"
VECTOR = "dense"
KIND_FIELD = "_kind"
ID_FIELD = "_id"
FLUSH_EVERY_S = 5.0
_KIND_NAMESPACES = {kind: uuid.uuid5(uuid.NAMESPACE_URL, f"atommem/{kind.value}") for kind in Kind}


def engine_version() -> str:
    return metadata.version("qdrant-edge-py")


def _version_key(text: str) -> tuple[int, ...]:
    parts = []
    for piece in text.split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


def point_key(kind: Kind, record_id: str) -> str:
    """The engine's id of a record: distinct per kind, stable per record."""
    return str(uuid.uuid5(_KIND_NAMESPACES[kind], record_id))


def _match(key: str, value: str) -> qe.FieldCondition:
    return qe.FieldCondition(key=key, match=qe.MatchValue(value))


class EdgeStore:
    """The `Store` on a Qdrant Edge shard in `path`, opened on first use."""

    def __init__(self, path: Path, dimension: int, scroll_page: int = 1024) -> None:
        self._path = Path(path)
        self._dimension = dimension
        self._page = scroll_page
        self._lock = threading.Lock()
        self._opened: qe.EdgeShard | None = None
        self._owner: IO[str] | None = None
        self._flushed = time.monotonic()

    @property
    def location(self) -> str:
        return str(self._path)

    # -- opening -------------------------------------------------------------------------

    @property
    def _shard(self) -> qe.EdgeShard:
        shard = self._opened
        if shard is not None:
            return shard
        with self._lock:
            if self._opened is None:
                self._opened = self._open()
            return self._opened

    def _open(self) -> qe.EdgeShard:
        try:
            self._path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create the store directory {self._path}: {exc}") from None
        self._take_ownership()
        try:
            return self._load_or_create()
        except BaseException:
            self._release_ownership()
            raise

    def _take_ownership(self) -> None:
        path = self._path / OWNER
        try:
            handle = open(path, "a+", encoding="utf-8")  # noqa: SIM115 - held while open
        except OSError as exc:
            raise StoreError(f"cannot open {path}: {exc}") from None
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            owner = handle.read().strip() or "another process"
            handle.close()
            raise StoreBusy(
                f"the store at {self._path} is open in another process ({owner}); one process "
                "owns an embedded store: stop it, or point both at a Qdrant server "
                "(ATOMMEM_STORE__QDRANT_URL)"
            ) from None
        who = f"pid {os.getpid()} on {socket.gethostname()}: {' '.join(sys.argv)[:200]}"
        handle.seek(0)
        handle.truncate()
        handle.write(who)
        handle.flush()
        self._owner = handle

    def _release_ownership(self) -> None:
        if self._owner is not None:
            self._owner.close()  # closing the file releases the flock
            self._owner = None

    def _load_or_create(self) -> qe.EdgeShard:
        marker = self._path / MARKER
        shard_dir = self._path / SHARD
        if not marker.exists():
            self._refuse_foreign()
            info = {
                "format": FORMAT,
                "engine": ENGINE,
                "engine_version": engine_version(),
                "dimension": self._dimension,
            }
            tmp = marker.with_suffix(".tmp")
            tmp.write_text(json.dumps(info), encoding="utf-8")
            os.replace(tmp, marker)
        self._check_marker(marker)
        if not (shard_dir / "edge_config.json").exists():
            return self._create(shard_dir)
        try:
            return qe.EdgeShard.load(str(shard_dir))
        except Exception as exc:  # the engine reports any unreadable shard as Exception
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise StoreFormatError(
                f"the store at {self._path} cannot be opened by Qdrant Edge {engine_version()} "
                f"({first}); restore it from a copy or re-ingest into a new directory"
            ) from None

    def _refuse_foreign(self) -> None:
        """A directory with no marker must be empty (a new store) or hold only our lock."""
        present = sorted(p.name for p in self._path.iterdir() if p.name not in (OWNER, SHARD))
        if not present:
            return
        if "meta.json" in present or "collection" in present:
            what = "an older atommem store (qdrant-client local mode)"
            todo = (
                "open it with the atommem release that wrote it and copy its spaces to a Qdrant "
                "server (`atommem space push --to URL`), or re-ingest its sessions"
            )
        else:
            what = f"files this store does not know ({', '.join(present[:3])})"
            todo = "choose an empty directory (--data-dir or ATOMMEM_STORE__QDRANT_PATH)"
        raise StoreFormatError(f"the store at {self._path} holds {what}; {todo}")

    def _check_marker(self, marker: Path) -> None:
        try:
            info = json.loads(marker.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise StoreFormatError(f"the store marker {marker} is unreadable ({exc})") from None
        if not isinstance(info, dict) or info.get("engine") != ENGINE:
            raise StoreFormatError(
                f"the store at {self._path} was not written by {ENGINE}; choose another directory"
            )
        if info.get("format") != FORMAT:
            raise StoreFormatError(
                f"the store at {self._path} is in store format {info.get('format')}, this "
                f"release reads format {FORMAT}; use the release that wrote it"
            )
        written = str(info.get("engine_version", "0"))
        if _version_key(written) > _version_key(engine_version()):
            raise StoreFormatError(
                f"the store at {self._path} was written by Qdrant Edge {written}, newer than "
                f"this install's {engine_version()}; upgrade atommem before opening it"
            )
        if info.get("dimension") != self._dimension:
            raise StoreFormatError(
                f"the store at {self._path} holds {info.get('dimension')}-d vectors, the "
                f"embedding model makes {self._dimension}-d ones; use the model it was built with"
            )

    def _create(self, shard_dir: Path) -> qe.EdgeShard:
        config = qe.EdgeConfig(
            vectors={VECTOR: qe.EdgeVectorParams(size=self._dimension, distance=qe.Distance.Cosine)}
        )
        shard = qe.EdgeShard.create(str(shard_dir), config)
        shard.update(
            qe.UpdateOperation.create_field_index("tenant", qe.KeywordIndexParams(is_tenant=True))
        )
        fields = {"space", KIND_FIELD}
        for names in KEYWORD_FIELDS.values():
            fields.update(names)
        for name in sorted(fields):
            shard.update(qe.UpdateOperation.create_field_index(name, qe.PayloadSchemaType.Keyword))
        for names in DATETIME_FIELDS.values():
            for name in names:
                shard.update(
                    qe.UpdateOperation.create_field_index(name, qe.PayloadSchemaType.Datetime)
                )
        shard.flush()
        return shard

    # -- writes --------------------------------------------------------------------------

    def write(self, points: Sequence[tuple[Kind, Point]]) -> None:
        if not points:
            return
        structs = []
        for kind, point in points:
            check_scoped(kind, point)
            vector: dict[str, Any] = {}
            if point.vector is not None:
                vector = {VECTOR: np.asarray(point.vector, dtype=np.float32)}
            payload = {**point.payload, KIND_FIELD: kind.value, ID_FIELD: point.id}
            structs.append(qe.Point(point_key(kind, point.id), vector, payload))
        self._update(qe.UpdateOperation.upsert_points(structs))

    def upsert(self, kind: Kind, points: Sequence[Point]) -> None:
        self.write([(kind, p) for p in points])

    def delete(self, kind: Kind, tenant: str, space: str, ids: Sequence[str]) -> None:
        if not ids:
            return
        keys: set[Any] = {point_key(kind, i) for i in ids}
        selector = self._scope(kind, tenant, space, qe.HasIdCondition(keys))
        self._update(qe.UpdateOperation.delete_points_by_filter(selector))

    def delete_scope(self, kind: Kind, tenant: str, space: str) -> None:
        self._update(qe.UpdateOperation.delete_points_by_filter(self._scope(kind, tenant, space)))

    def _update(self, operation: qe.UpdateOperation) -> None:
        shard = self._shard
        try:
            shard.update(operation)
            if time.monotonic() - self._flushed > FLUSH_EVERY_S:
                # the log already holds the update; flushing bounds its replay at the next open
                self._flushed = time.monotonic()
                shard.flush()
        except Exception as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise StoreError(f"writing to the store at {self._path} failed: {first}") from None

    # -- reads ---------------------------------------------------------------------------

    @staticmethod
    def _scope(kind: Kind, tenant: str, space: str | None, *more: Any) -> qe.Filter:
        # built whole: a Filter's `must` property returns a copy, so appending to it is lost
        must: list[Any] = [_match(KIND_FIELD, kind.value), _match("tenant", tenant)]
        if space is not None:
            must.append(_match("space", space))
        return qe.Filter(must=[*must, *more])

    @staticmethod
    def _point(record: Any, with_vectors: bool) -> Point:
        payload = dict(record.payload or {})
        payload.pop(KIND_FIELD, None)
        record_id = str(payload.pop(ID_FIELD, record.id))
        vector = None
        if with_vectors:
            raw = (record.vector or {}).get(VECTOR)
            if raw is not None:
                vector = np.asarray(raw, dtype=np.float32)
        return Point(id=record_id, payload=payload, vector=vector)

    def scroll(
        self, kind: Kind, tenant: str, space: str | None, with_vectors: bool = False
    ) -> Iterator[Point]:
        flt = self._scope(kind, tenant, space)
        offset: Any = None
        with_vector: bool | list[str] = [VECTOR] if with_vectors else False
        while True:
            records, offset = self._shard.scroll(
                qe.ScrollRequest(
                    offset=offset,
                    limit=self._page,
                    filter=flt,
                    with_payload=True,
                    with_vector=with_vector,
                )
            )
            for record in records:
                yield self._point(record, with_vectors)
            if offset is None:
                return

    def retrieve(
        self, kind: Kind, tenant: str, space: str, ids: Sequence[str], with_vectors: bool = False
    ) -> list[Point]:
        if not ids:
            return []
        keys: list[Any] = [point_key(kind, i) for i in ids]
        found = self._shard.retrieve(
            keys, with_payload=True, with_vector=[VECTOR] if with_vectors else False
        )
        out = []
        for record in found:
            payload = record.payload or {}
            if (
                payload.get(KIND_FIELD) != kind.value
                or payload.get("tenant") != tenant
                or payload.get("space") != space
            ):
                continue
            out.append(self._point(record, with_vectors))
        order = {record_id: i for i, record_id in enumerate(ids)}
        out.sort(key=lambda p: order.get(p.id, len(order)))
        return out

    def count(self, kind: Kind, tenant: str, space: str | None) -> int:
        return int(
            self._shard.count(qe.CountRequest(exact=True, filter=self._scope(kind, tenant, space)))
        )

    def close(self) -> None:
        with self._lock:
            if self._opened is not None:
                try:
                    self._opened.flush()
                finally:
                    self._opened.close()
                    self._opened = None
            self._release_ownership()
