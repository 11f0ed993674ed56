"""What the memory pipeline asks of durable storage, whichever engine holds it.

Two backends implement `Store`: Qdrant Edge in-process (`common.store.edge`, the embedded
default) and a Qdrant server through qdrant-client (`common.store.qdrant`). Every read and
write is scoped to one tenant (and usually one space); the backends pass one contract suite
(`tests/unit/test_store_contract.py`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from common.errors import AtomMemError, Unavailable

if TYPE_CHECKING:
    from common.store.snapshots import IndexSnapshots


class Kind(StrEnum):
    FACTS = "facts"
    EVENTS = "events"
    PROFILES = "profiles"
    SESSIONS = "sessions"
    SPACES = "spaces"


VECTOR_KINDS = (Kind.FACTS, Kind.EVENTS, Kind.PROFILES)

# Payload fields indexed per kind, beyond tenant and space, in a Qdrant server's collections
# (common/store/qdrant.py); the embedded store indexes only the fields its filters use.
KEYWORD_FIELDS: dict[Kind, tuple[str, ...]] = {
    Kind.FACTS: ("participants", "keywords", "source.session_id"),
    Kind.EVENTS: ("participants", "keywords"),
    Kind.PROFILES: ("person",),
    Kind.SESSIONS: ("session.session_id",),
    Kind.SPACES: (),
}
DATETIME_FIELDS: dict[Kind, tuple[str, ...]] = {Kind.FACTS: ("time.session",)}


@dataclass(frozen=True)
class Point:
    id: str
    payload: dict[str, Any]
    vector: np.ndarray | None = None


def check_scoped(kind: Kind, point: Point) -> None:
    if "tenant" not in point.payload or "space" not in point.payload:
        raise ValueError(f"{kind} point {point.id} lacks tenant/space in its payload")


def in_asked_order(points: list[Point], ids: Sequence[str]) -> list[Point]:
    """`points` in the order their ids were asked for (what `Store.retrieve` returns)."""
    order = {record_id: i for i, record_id in enumerate(ids)}
    return sorted(points, key=lambda p: order.get(p.id, len(order)))


class StoreError(AtomMemError):
    """The store cannot be used as it is; the message says what to do."""


class StoreBusy(StoreError):
    """Another process owns the embedded store."""


class StoreUnavailable(StoreError, Unavailable):
    """The store cannot write now (disk full or read-only, a failed flush); nothing of the
    refused write is acknowledged. The message names no path (the worker's log does)."""


class StoreFormatError(StoreError):
    """The store directory holds something this version cannot open."""


class Store(Protocol):
    """Durable facts, events, profiles, raw sessions and spaces."""

    # Saved space indexes, where one process owns the store (the embedded one); else None.
    snapshots: IndexSnapshots | None

    @property
    def location(self) -> str:
        """Where the data lives (a directory or a server URL), for messages."""
        ...

    def write(self, points: Sequence[tuple[Kind, Point]]) -> None:
        """Upsert points of any kinds together: one engine operation where the backend has
        a single log (Edge), else kind by kind in the order the kinds first appear. Every
        write is durable when it returns (Edge flushes, the server is asked to wait)."""
        ...

    def upsert(self, kind: Kind, points: Sequence[Point]) -> None:
        """Write points; every payload must name its tenant and space."""
        ...

    def together(self) -> AbstractContextManager[None]:
        """The calling thread's writes inside it are durable when it ends rather than each
        when it returns (Edge: one flush for them all); nothing inside is acknowledged
        before it ends."""
        ...

    def durable(self) -> None:
        """Inside `together()`: the calling thread's writes so far are durable when this
        returns (Edge: one flush now), and the block goes on; elsewhere nothing is pending."""
        ...

    def delete(self, kind: Kind, tenant: str, space: str, ids: Sequence[str]) -> None:
        """Delete points by id, only within the tenant's space."""
        ...

    def delete_scope(self, kind: Kind, tenant: str, space: str) -> None:
        """Delete every point of the tenant's space."""
        ...

    def scroll(
        self, kind: Kind, tenant: str, space: str | None, with_vectors: bool = False
    ) -> Iterator[Point]:
        """Every point of a tenant (and space), page by page."""
        ...

    def retrieve(
        self, kind: Kind, tenant: str, space: str, ids: Sequence[str], with_vectors: bool = False
    ) -> list[Point]:
        """Points by id, dropping any that belong to another tenant or space."""
        ...

    def count(self, kind: Kind, tenant: str, space: str | None) -> int: ...

    def compact(self) -> None:
        """After an erasure: physically drop deleted and replaced points, from the files and
        logs the backend controls (Edge rewrites its shard). Raises StoreError when it
        cannot; the erasure is then not acknowledged."""
        ...

    def close(self) -> None: ...
