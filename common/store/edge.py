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

One process owns the directory. Edge's calls are safe from several threads at once:
`tests/unit/test_store_edge.py` runs upserts, deletes, retrieves, scrolls and counts from eight
threads on one store, with a flush after every update, and every point lands or goes exactly
as the operations say, with no error (qdrant-edge-py 0.9.0). So the only lock here guards
opening and closing.

A directory this release cannot open is refused before anything in it is touched: the marker
and foreign files are checked before the lock file is created, and a shard the engine rejects
leaves the lock file as it was. (A corrupt write-ahead log is the exception: the engine has
already loaded the segments, which folds in and removes their `tracker_journal.dat` files
and updates times; no file that stays changes its contents.)

The engine maps its files into memory, so a write that needs a new disk block on a full disk
kills the process (SIGBUS) instead of raising. Opening the shard and each update therefore
first check that the store's filesystem is writable and has `MIN_FREE_BYTES` free, and refuse
with `StoreUnavailable` when not; the check cannot see space taken by others between it and
the write.

Durability: every update is flushed (`EdgeShard.flush`) before it returns (inside
`together()`, before that returns), so a write that returned is on disk; the engine's log is
mapped into memory, so an update "succeeds" on a filesystem that can no longer write, and
only the flush says so. A failed flush, or an update failed by the disk (ENOSPC, EROFS, EIO,
EDQUOT), raises `StoreUnavailable` and the shard is closed, to be loaded again from its
files by the next call, so that this process never serves what the disk does not hold; an
update the engine rejects (it changed nothing) is a StoreError.

Erased text: the engine's write-ahead log (`shard/wal/open-N`, 32 MiB segments) keeps every
update's payload until its segment is rotated, and the engine cannot truncate it. `scrub`
(run after every erasure) therefore rewrites the shard: every live point, with its vector and
stored payload, is copied into a new shard (`shard.next/`, with the same field indexes),
which replaces the old one (`shard` → `shard.old`, `shard.next` → `shard`, `shard.old`
deleted) while every other call of this store waits. `scrub.pending` is written before and
removed after, so an interrupted scrub is finished at the next open: a complete `shard.next`
with `shard` missing is moved into place, any other leftover is discarded and the scrub run
again. A scrub first needs room for a second copy of the shard (its size on disk plus
`MIN_FREE_BYTES`) and is refused otherwise, the shard served as it was; a copy that fails
midway is deleted, so that it never holds the space the next open checks for. Its cost
grows with the whole store, not with what was erased: measured 0.4 s for 1k points and 1.3 s
for 10k (about 0.3 s plus 0.1 ms a point; docs/operations.md). A flush is almost all the
engine's msyncs of its mapped files, whose number grows with the payload indexes: a 40-fact
write with its flush took 9.9 ms at p50 with the three indexes of `INDEXED_FIELDS` against
15.2 ms with the six others an earlier release kept as well (`python -m bench.edge_flush`,
on a 3,000-fact shard), hence only three.
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import re
import shutil
import socket
import sys
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from importlib import metadata
from pathlib import Path
from typing import IO, Any

import numpy as np
import qdrant_edge as qe

from common.store.base import (
    VECTOR_KINDS,
    Kind,
    Point,
    StoreBusy,
    StoreError,
    StoreFormatError,
    StoreUnavailable,
    check_scoped,
    in_asked_order,
)
from common.store.snapshots import IndexSnapshots

log = logging.getLogger(__name__)

FORMAT = 2  # 2: payloads stored as one JSON document (DOC_FIELD)
ENGINE = "qdrant-edge"
MARKER = "atommem-store.json"
OWNER = "owner.lock"
SHARD = "shard"
NEXT = "shard.next"  # a scrub's new shard, being built
OLD = "shard.old"  # the shard a scrub replaced, being deleted
SCRUB_PENDING = "scrub.pending"  # a scrub started and has not finished
SNAPSHOTS = "indexes"
VECTOR = "dense"
KIND_FIELD = "_kind"
ID_FIELD = "_id"
DOC_FIELD = "_doc"  # the record's payload as one JSON document
READ_FIELDS = [DOC_FIELD, ID_FIELD, KIND_FIELD, "tenant", "space"]
# The payload fields the store's filters use (`_scope`), each with an index. Every other
# field lives only in the document: an index costs each flush its files' syncs (six unused
# ones made a commit-sized write half as long again: `bench.edge_flush`) and no read here
# filters on another field.
INDEXED_FIELDS = ("tenant", "space", KIND_FIELD)
COPY_PAGE = 512  # points per update when a scrub copies the shard
# More than one update and a new 32 MiB log segment need (see the module docstring).
MIN_FREE_BYTES = 64 * 2**20
# Failures of the disk under the store (full, read-only, failing, over quota): the store is
# unavailable until an operator fixes the disk, not broken.
DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EROFS, errno.EIO, errno.EDQUOT})
# how the engine (Rust) names an OS error: "(os error 28)", or "Os { code: 30, ... }"
_OS_ERROR = re.compile(r"os error (\d+)|Os \{ code: (\d+)")
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


def _stored(kind: Kind, point: Point) -> dict[str, Any]:
    """What the engine holds for a point: the fields filters use (`INDEXED_FIELDS`), as
    payload fields, and the whole payload as one JSON document. Handing the engine a
    document is one string for it to copy, where a nested payload is converted value by value
    (that conversion was the largest cost of a commit stage's write)."""
    payload = point.payload
    stored: dict[str, Any] = {
        "tenant": payload["tenant"],
        "space": payload["space"],
        KIND_FIELD: kind.value,
        ID_FIELD: point.id,
        DOC_FIELD: json.dumps(payload, ensure_ascii=False, separators=(",", ":")),
    }
    return stored


class _Gate:
    """Many calls on the shard at once, or one that replaces it (a scrub, a reload, closing)
    while the others wait."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._users = 0
        self._exclusive = False

    @contextmanager
    def shared(self) -> Iterator[None]:
        with self._cond:
            while self._exclusive:
                self._cond.wait()
            self._users += 1
        try:
            yield
        finally:
            with self._cond:
                self._users -= 1
                if not self._users:
                    self._cond.notify_all()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._cond:
            while self._exclusive:
                self._cond.wait()
            self._exclusive = True  # new calls wait from now on
            try:
                while self._users:
                    self._cond.wait()
            except BaseException:  # interrupted waiting (a time limit, Ctrl-C): let them in
                self._exclusive = False
                self._cond.notify_all()
                raise
        try:
            yield
        finally:
            with self._cond:
                self._exclusive = False
                self._cond.notify_all()


class _Flushes:
    """Group commit: an update returns once a flush that began after it was applied has
    ended. The engine's flush writes out everything the shard holds, so writers on several
    threads share one; a writer that finds a flush under way waits for it and, if it began
    too early to cover its update, starts the next. Tickets number the updates applied; the
    updates a failed flush or a reload may have lost stay lost, whatever is flushed later.

    A failed flush also stops every later flush until the shard is loaded again (`reloaded`):
    the engine's memory may then hold what its files lack, and a flush that succeeded after
    it would acknowledge updates on top of a state the disk never saw. `epoch` counts the
    loads, so that the writers who find their updates lost reload the shard once between
    them, not once each."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._applied = 0
        self._flushed = 0  # every update up to this ticket is on disk, but those lost
        self._running = False
        self._lost: list[tuple[int, int, str, int]] = []  # (first, last ticket, why, epoch)
        self._failed: str | None = None  # a flush failed in this epoch: none may run
        self.epoch = 0

    def applied(self) -> int:
        """Note an update applied in memory; its ticket for `wait_durable`."""
        with self._cond:
            self._applied += 1
            return self._applied

    def _lose(self, why: str, last: int) -> None:
        if last > self._flushed:
            self._lost.append((self._flushed + 1, last, why, self.epoch))
        self._cond.notify_all()

    def reloaded(self, why: str) -> None:
        """The shard was closed and is loaded again from its files: what was not flushed may
        never reach the disk, and flushing may start again."""
        with self._cond:
            self._lose(why, self._applied)
            self._failed = None
            self.epoch += 1

    def flushed_all(self) -> None:
        """Every update applied is on disk (the shard was flushed and closed)."""
        with self._cond:
            self._flushed = max(self._flushed, self._applied)
            self._cond.notify_all()

    def wait_durable(self, ticket: int, flush: Callable[[], None]) -> None:
        """Return once the update of `ticket` is on disk, flushing if no flush under way
        covers it; raises StoreFlushFailed if it may have been lost."""
        while True:
            with self._cond:
                while True:
                    for first, last, why, epoch in self._lost:
                        if first <= ticket <= last:
                            raise StoreFlushFailed(why, reload=epoch == self.epoch)
                    if self._flushed >= ticket:
                        return
                    if self._failed is not None:
                        self._lose(self._failed, self._applied)
                        continue  # `ticket` is among them now
                    if not self._running:
                        break
                    self._cond.wait()
                self._running = True
                target = self._applied
            failed = "the flush was interrupted"  # unless it ends, one way or the other
            try:
                flush()
                failed = ""
            except Exception as exc:
                failed = _first_line(exc)
            finally:
                with self._cond:
                    self._running = False
                    if failed:
                        self._failed = failed
                        self._lose(failed, target)
                    else:
                        self._flushed = max(self._flushed, target)
                    self._cond.notify_all()
            # back to the checks: covered now, or lost with the updates this flush held


class _Held:
    """A thread's `together()`: the tickets of its updates and the spaces they wrote."""

    def __init__(self) -> None:
        self.tickets: list[int] = []
        self.spaces: set[tuple[str, str]] = set()


class StoreFlushFailed(Exception):
    """The flush that was to make an update durable failed (its first line). `reload`: the
    shard has not been loaded again since, so the caller should."""

    def __init__(self, why: str, reload: bool = True) -> None:
        super().__init__(why)
        self.reload = reload


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _disk_failure(why: str) -> bool:
    """Whether an engine error's text names a failure of the disk (`DISK_ERRNOS`)."""
    return any(int(a or b) in DISK_ERRNOS for a, b in _OS_ERROR.findall(why))


def _size_on_disk(path: Path) -> int:
    """The bytes the files under `path` occupy (allocated blocks: the engine's mapped files
    are sparse)."""
    total = 0
    for item in path.rglob("*"):
        with suppress(OSError):
            total += item.lstat().st_blocks * 512
    return total


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class EdgeStore:
    """The `Store` on a Qdrant Edge shard in `path`, opened on first use. Every write is
    flushed to disk before it returns (inside `together()`, before that returns); `compact`
    (after an erasure) rewrites the whole shard, blocking the store's other calls meanwhile:
    at most about 0.3 s plus 0.1 ms per stored point (module docstring)."""

    def __init__(self, path: Path, dimension: int, scroll_page: int = 1024) -> None:
        self._path = Path(path)
        self._dimension = dimension
        self._page = scroll_page
        self._lock = threading.Lock()
        self._gate = _Gate()
        self._flushes = _Flushes()
        self._together = threading.local()  # per thread: its `together()` (_Held)
        self._opened: qe.EdgeShard | None = None
        self._owner: IO[str] | None = None
        # the lock file's line and times before we took it, restored if opening fails
        self._previous_owner: tuple[str, int, int] | None = None
        self.snapshots: IndexSnapshots | None = IndexSnapshots(self._path / SNAPSHOTS)

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
        # checked before the lock file exists, so a refused directory is left untouched;
        # checked again below once this process owns the directory
        self._check_layout()
        self._refuse_read_only("opening")
        # An interrupted scrub's leftovers hold space the free-space check wants: they are
        # settled (the owner's job) before it. Otherwise checked before the lock file exists.
        leftovers = any((self._path / name).exists() for name in (NEXT, OLD))
        if not leftovers:
            # before anything is created or loaded: the engine maps its files (32 MiB of log
            # at once) and a full disk would kill the process
            self._check_writable("opening")
        if self._owner is None:  # else kept while the shard was closed to be loaded again
            self._take_ownership()
        try:
            self._settle_swap()
            if leftovers:
                self._check_writable("opening")
            shard = self._load_or_create()
            if (self._path / SCRUB_PENDING).exists():
                shard = self._scrub_at_open(shard)
        except BaseException:
            self._release_ownership(restore=True)
            raise
        self._previous_owner = None
        return shard

    def _check_layout(self) -> None:
        marker = self._path / MARKER
        if marker.exists():
            self._check_marker(marker)
        else:
            self._refuse_foreign()

    def _take_ownership(self) -> None:
        path = self._path / OWNER
        try:
            handle = open(path, "a+", encoding="utf-8")  # noqa: SIM115 - held while open
        except OSError as exc:
            raise StoreError(
                f"cannot open the store's lock file {path} ({exc.strerror}); the store needs a "
                "writable directory: fix its permissions or choose another"
            ) from None
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
        # the program's name only: its arguments may hold a user's words (a question)
        program = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "python"
        who = f"pid {os.getpid()} on {socket.gethostname()}: {program}"
        handle.seek(0)
        before = os.stat(handle.fileno())
        self._previous_owner = (handle.read(), before.st_atime_ns, before.st_mtime_ns)
        handle.seek(0)
        handle.truncate()
        handle.write(who)
        handle.flush()
        self._owner = handle

    def _release_ownership(self, restore: bool = False) -> None:
        if self._owner is None:
            return
        if restore and self._previous_owner is not None:
            text, atime, mtime = self._previous_owner
            try:
                self._owner.seek(0)
                self._owner.truncate()
                self._owner.write(text)
                self._owner.flush()
                os.utime(self._owner.fileno(), ns=(atime, mtime))
            except OSError:
                pass  # best effort: the open has failed already and says why
        self._previous_owner = None
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
            with open(tmp, "w", encoding="utf-8") as handle:
                handle.write(json.dumps(info))
                handle.flush()
                os.fsync(handle.fileno())  # on disk before anything is acknowledged
            os.replace(tmp, marker)
            _fsync_dir(self._path)
        self._check_marker(marker)
        if not (shard_dir / "edge_config.json").exists():
            return self._create(shard_dir)
        try:
            shard = qe.EdgeShard.load(str(shard_dir), self._config())
        except Exception as exc:  # the engine reports any unreadable shard as Exception
            first = _first_line(exc)
            if _disk_failure(first):  # full, read-only, failing: not the shard's fault
                raise self._unavailable("opening", first) from None
            raise StoreFormatError(
                f"the store at {self._path} cannot be opened by Qdrant Edge {engine_version()} "
                f"({first}); restore it from a copy or re-ingest into a new directory"
            ) from None
        try:
            self._drop_unused_indexes(shard)
        except Exception as exc:  # the disk failed under it: served by no one until fixed
            with suppress(Exception):
                shard.close()
            raise self._unavailable("opening", _first_line(exc)) from None
        return shard

    def _refuse_foreign(self) -> None:
        """A directory with no marker must be empty (a new store) or hold only our lock."""
        ours = (OWNER, SHARD, SNAPSHOTS, NEXT, OLD, SCRUB_PENDING)
        present = sorted(p.name for p in self._path.iterdir() if p.name not in ours)
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

    def _config(self) -> qe.EdgeConfig:
        """The shard's vectors, and optimisers that never build an HNSW index (recall scans
        the space index instead: docs/architecture.md) and that rewrite any segment holding a
        deleted or replaced point when `compact` runs them."""
        return qe.EdgeConfig(
            vectors={
                VECTOR: qe.EdgeVectorParams(size=self._dimension, distance=qe.Distance.Cosine)
            },
            optimizers=qe.EdgeOptimizersConfig(
                indexing_threshold=0, deleted_threshold=1e-9, vacuum_min_vector_number=1
            ),
        )

    def _create(self, shard_dir: Path) -> qe.EdgeShard:
        shard = qe.EdgeShard.create(str(shard_dir), self._config())
        try:
            self._create_indexes(shard)
        except BaseException:
            shard.close()
            raise
        return shard

    def _create_indexes(self, shard: qe.EdgeShard) -> None:
        shard.update(
            qe.UpdateOperation.create_field_index("tenant", qe.KeywordIndexParams(is_tenant=True))
        )
        for name in INDEXED_FIELDS[1:]:
            shard.update(qe.UpdateOperation.create_field_index(name, qe.PayloadSchemaType.Keyword))
        shard.flush()

    @staticmethod
    def _drop_unused_indexes(shard: qe.EdgeShard) -> None:
        """A shard created by an earlier release also indexed fields no filter uses
        (participants, keywords, session ids, person, session time): their indexes go, so
        that its flushes cost what a new shard's do. The points keep those payload fields,
        which nothing reads."""
        unused = sorted(set(shard.info().payload_schema) - set(INDEXED_FIELDS))
        for name in unused:
            shard.update(qe.UpdateOperation.delete_field_index(name))
        if unused:
            shard.flush()

    # -- writes --------------------------------------------------------------------------

    def write(self, points: Sequence[tuple[Kind, Point]]) -> None:
        if not points:
            return
        structs = []
        spaces: set[tuple[str, str]] = set()
        for kind, point in points:
            check_scoped(kind, point)
            if kind in VECTOR_KINDS:
                spaces.add((point.payload["tenant"], point.payload["space"]))
            vector: dict[str, Any] = {}
            if point.vector is not None:
                vector = {VECTOR: np.asarray(point.vector, dtype=np.float32)}
            structs.append(qe.Point(point_key(kind, point.id), vector, _stored(kind, point)))
        self._update(qe.UpdateOperation.upsert_points(structs), spaces)

    def upsert(self, kind: Kind, points: Sequence[Point]) -> None:
        self.write([(kind, p) for p in points])

    def delete(self, kind: Kind, tenant: str, space: str, ids: Sequence[str]) -> None:
        if not ids:
            return
        keys: set[Any] = {point_key(kind, i) for i in ids}
        selector = self._scope(kind, tenant, space, qe.HasIdCondition(keys))
        spaces = {(tenant, space)} if kind in VECTOR_KINDS else set()
        self._update(qe.UpdateOperation.delete_points_by_filter(selector), spaces)

    def delete_scope(self, kind: Kind, tenant: str, space: str) -> None:
        spaces = {(tenant, space)} if kind in VECTOR_KINDS else set()
        selector = self._scope(kind, tenant, space)
        self._update(qe.UpdateOperation.delete_points_by_filter(selector), spaces)

    def _update(
        self, operation: qe.UpdateOperation, spaces: set[tuple[str, str]] | None = None
    ) -> None:
        """Apply one engine update and flush it. The saved indexes of `spaces` (whose facts,
        events or profiles it changes) are deleted before it and their generation moves again
        after it, so that an index read while it was under way is never saved (see
        snapshots.py)."""
        failed: str | None = None
        flushing = False
        reload = True
        held: _Held | None = getattr(self._together, "held", None)
        with self._gate.shared():
            epoch = self._flushes.epoch
            shard = self._shard  # opened first: only the owner may touch the saved indexes
            for tenant, space in spaces or ():
                if self.snapshots is not None:
                    self.snapshots.invalidate(tenant, space)
                    if held is not None and (tenant, space) not in held.spaces:
                        # no saved index of the space until the block's flush
                        self.snapshots.hold(tenant, space)
                        held.spaces.add((tenant, space))
            try:
                self._check_writable("writing to")
                try:
                    shard.update(operation)
                    flushing = True
                    ticket = self._flushes.applied()
                    if held is not None:
                        held.tickets.append(ticket)  # flushed once, when `together()` ends
                    else:
                        # durable before it returns: the log is mapped into memory, so an
                        # update on a disk that can no longer write fails only here
                        self._flushes.wait_durable(ticket, shard.flush)
                except StoreFlushFailed as exc:
                    failed, reload = str(exc), exc.reload
                except Exception as exc:
                    failed = _first_line(exc)
            finally:
                if held is None:  # (a block's spaces were held above, until its flush)
                    self._written(spaces)
        if failed is None:
            return
        if flushing or _disk_failure(failed):
            # The engine may hold in memory what its files lack: load it from them next time
            # (once: the writers whose updates the same failure lost share the reload).
            if reload:
                self._reload(epoch)
            raise self._unavailable("writing to", failed)
        # the engine refused the update itself (it changed nothing): not the disk's fault
        log.error("writing to the store at %s failed: %s", self._path, failed)
        raise StoreError(f"writing to the store failed ({failed})")

    @contextmanager
    def together(self) -> Iterator[None]:
        """This thread's writes inside reach the disk with one flush, when it ends (and
        before it returns): a commit stage's plan record and its points cost one flush, not
        two. An exception inside skips the flush (nothing of it was acknowledged); a flush
        that fails raises StoreUnavailable, as a write's own would. Nested: the outer one
        flushes (and `durable` flushes what it holds so far)."""
        if getattr(self._together, "held", None) is not None:
            yield
            return
        held = _Held()
        self._together.held = held
        try:
            yield
        except BaseException:  # nothing of it acknowledged: no flush
            self._together.held = None
            self._written(held.spaces, held=True)
            raise
        self._together.held = None
        self._flush_held(held)

    def durable(self) -> None:
        """Every write this thread made inside its `together()` so far is on disk when this
        returns, as if the block ended here (one flush, or one under way that covers them);
        what the block writes after is flushed when it ends. Outside one, nothing is
        pending: each write was flushed before it returned."""
        held: _Held | None = getattr(self._together, "held", None)
        if held is None:
            return
        try:
            self._flush_held(held)
        finally:
            held.tickets.clear()
            held.spaces.clear()

    def _flush_held(self, held: _Held) -> None:
        """Flush the updates of `held` (or wait for a flush under way that covers them),
        then let their spaces' indexes be saved again; StoreUnavailable if it fails."""
        if not held.tickets:
            self._written(held.spaces, held=True)
            return
        failed: str | None = None
        reload = True
        try:
            with self._gate.shared():
                epoch = self._flushes.epoch
                try:
                    # lost updates are found before the shard is touched (or loaded again)
                    self._flushes.wait_durable(max(held.tickets), lambda: self._shard.flush())
                except StoreFlushFailed as exc:
                    failed, reload = str(exc), exc.reload
                except Exception as exc:
                    failed = _first_line(exc)
        finally:
            self._written(held.spaces, held=True)
        if failed is not None:
            if reload:
                self._reload(epoch)
            raise self._unavailable("writing to", failed)

    def _written(self, spaces: set[tuple[str, str]] | None, held: bool = False) -> None:
        """The writes to `spaces` are durable (or failed): their indexes may be saved again.
        `held`: they were written inside a `together()`, which held the saves back."""
        for tenant, space in spaces or ():
            if self.snapshots is not None:
                self.snapshots.written(tenant, space, held)

    def _reload(self, epoch: int | None = None) -> None:
        """Close the shard (keeping the directory's lock); the next call loads it again.
        `epoch`: only if the shard has not been loaded again since (`_Flushes.epoch`)."""
        with self._gate.exclusive(), self._lock:
            if epoch is not None and epoch != self._flushes.epoch:
                return  # another writer's reload after the same failure
            # what was not flushed yet may be missing from the files it is loaded from
            self._flushes.reloaded("the store was loaded again from its files")
            if self._opened is not None:
                try:
                    self._opened.close()
                except Exception as exc:  # closing flushes, which is what failed
                    log.warning("closing the store at %s: %s", self._path, _first_line(exc))
                self._opened = None

    def _unavailable(self, doing: str, why: str) -> StoreUnavailable:
        """The failure as tenants see it (no path); the log names the store."""
        log.error("%s the store at %s failed: %s", doing, self._path, why)
        return StoreUnavailable(f"{doing} the store failed ({why}); try again later")

    def _check_writable(self, doing: str, need: int = MIN_FREE_BYTES) -> None:
        """Refuse (StoreUnavailable) unless the store's filesystem is writable and has `need`
        bytes free."""
        self._refuse_read_only(doing)
        free = self._free_bytes()
        if free < need:
            log.error(
                "%s the store at %s refused: %d MiB free, it needs %d MiB",
                doing,
                self._path,
                free // 2**20,
                -(-need // 2**20),
            )
            raise StoreUnavailable(
                f"{doing} the store refused: {free // 2**20} MiB free on its disk, it needs "
                f"{-(-need // 2**20)} MiB; try again once space is freed"
            )

    def _refuse_read_only(self, doing: str) -> None:
        if self._read_only():
            log.error("%s the store at %s refused: its filesystem is read-only", doing, self._path)
            raise StoreUnavailable(f"{doing} the store refused: its filesystem is read-only")

    def _read_only(self) -> bool:
        try:
            return bool(os.statvfs(self._path).f_flag & os.ST_RDONLY)
        except OSError:
            return False  # cannot tell: let the engine report what is wrong

    def _free_bytes(self) -> int:
        try:
            stat = os.statvfs(self._path)
        except OSError:
            return MIN_FREE_BYTES  # cannot tell: let the engine report what is wrong
        return stat.f_bavail * stat.f_frsize

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
        stored = record.payload or {}
        payload = json.loads(stored[DOC_FIELD])
        record_id = str(stored.get(ID_FIELD, record.id))
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
            # a page at a time: a scrub between pages keeps every point's id, so the offset
            # stays valid in the new shard
            with self._gate.shared():
                records, offset = self._shard.scroll(
                    qe.ScrollRequest(
                        offset=offset,
                        limit=self._page,
                        filter=flt,
                        with_payload=READ_FIELDS,
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
        with self._gate.shared():
            found = self._shard.retrieve(
                keys, with_payload=READ_FIELDS, with_vector=[VECTOR] if with_vectors else False
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
        return in_asked_order(out, ids)

    def compact(self) -> None:
        """After an erasure: rewrite the shard from its live points, so that nothing erased
        stays in its segments or its write-ahead log (see the module docstring); every other
        call waits meanwhile. Raises StoreError when it cannot: the erasure is then not
        acknowledged, and the next open (or compaction) runs it again (`scrub.pending`). A
        scrub refused or failed before its swap leaves the shard as it was, still served."""
        with self._gate.exclusive():
            shard = self._shard
            try:
                fresh_dir = self._prepare_and_copy(shard)
            except StoreError:
                raise
            except Exception as exc:
                raise self._unavailable("compacting", _first_line(exc)) from None
            try:
                self._opened = self._replace(shard, fresh_dir)
            except StoreError:
                self._dropped("the store's scrub failed")  # the next call loads, and scrubs
                raise
            except Exception as exc:
                self._dropped("the store's scrub failed")
                raise self._unavailable("compacting", _first_line(exc)) from None
            except BaseException:  # a time limit, Ctrl-C: `shard` is closed all the same
                self._dropped("the store's scrub was interrupted")
                raise

    def _dropped(self, why: str) -> None:
        """The shard was closed by a scrub that failed: updates of an unfinished `together()`
        it held may be missing from the files it is loaded from next."""
        self._opened = None
        self._flushes.reloaded(why)

    def _scrub_at_open(self, shard: qe.EdgeShard) -> qe.EdgeShard:
        """Finish a scrub that was interrupted; if it cannot run now, serve the shard as it is
        (the next erasure's compaction, or the next open, runs it again)."""
        try:
            fresh_dir = self._prepare_and_copy(shard)
        except Exception as exc:
            log.error("the interrupted scrub of the store at %s failed again: %s", self._path, exc)
            return shard
        try:
            return self._replace(shard, fresh_dir)
        except Exception as exc:
            log.error("the interrupted scrub of the store at %s failed again: %s", self._path, exc)
            self._settle_swap()
            return qe.EdgeShard.load(str(self._path / SHARD), self._config())

    def _prepare_and_copy(self, shard: qe.EdgeShard) -> Path:
        """Mark the scrub pending, check there is room for a second copy of the shard, and
        copy it; on any failure `shard` is left open and untouched and no copy is left."""
        self._mark_scrub_pending()
        # the copy grows to the shard's size, and the engine needs its margin on top
        self._check_writable("compacting", _size_on_disk(self._path / SHARD) + MIN_FREE_BYTES)
        return self._copy(shard)

    def _mark_scrub_pending(self) -> None:
        """Written before anything can refuse the scrub, so that any later open runs it. On a
        full or read-only disk that cannot take even this empty file, the scrub is refused:
        by the space check that follows, or here."""
        pending = self._path / SCRUB_PENDING
        if pending.exists():
            return
        try:
            pending.write_bytes(b"")
            _fsync_dir(self._path)
        except OSError as exc:
            if exc.errno not in DISK_ERRNOS:
                raise
            self._check_writable("compacting")
            why = f"cannot write {SCRUB_PENDING}: {exc.strerror}"
            raise self._unavailable("compacting", why) from None

    def _copy(self, shard: qe.EdgeShard) -> Path:
        """Every live point of `shard`, with its vector and stored payload, in a new shard
        (closed, in `shard.next/`); a copy that fails is deleted, so that it holds no space."""
        fresh_dir = self._path / NEXT
        shutil.rmtree(fresh_dir, ignore_errors=True)
        try:
            fresh = self._create(fresh_dir)
            try:
                offset: Any = None
                while True:
                    records, offset = shard.scroll(
                        qe.ScrollRequest(
                            offset=offset, limit=COPY_PAGE, with_payload=True, with_vector=True
                        )
                    )
                    if records:
                        self._check_writable("compacting")  # the copy grows mapped files too
                        copies = [qe.Point(r.id, r.vector or {}, r.payload or {}) for r in records]
                        fresh.update(qe.UpdateOperation.upsert_points(copies))
                    if offset is None:
                        break
                fresh.flush()
            finally:
                fresh.close()
        except BaseException:
            shutil.rmtree(fresh_dir, ignore_errors=True)
            raise
        return fresh_dir

    def _replace(self, shard: qe.EdgeShard, fresh_dir: Path) -> qe.EdgeShard:
        """Swap the complete copy in and return it loaded; `shard` is closed whether this
        succeeds or not (an interrupted swap is settled at the next open)."""
        try:
            return self._swap_in(shard, fresh_dir)
        except BaseException:
            with suppress(Exception):
                shard.close()
            raise

    def _swap_in(self, shard: qe.EdgeShard, fresh_dir: Path) -> qe.EdgeShard:
        here, old = self._path / SHARD, self._path / OLD
        pending = self._path / SCRUB_PENDING
        # The copy holds every update applied, flushed or not (a `together()` under way
        # flushes the new shard when it ends), so closing this one loses nothing.
        shard.close()
        shutil.rmtree(old, ignore_errors=True)
        # From here the new shard is complete: an interruption is settled at the next open.
        os.replace(here, old)
        os.replace(fresh_dir, here)
        _fsync_dir(self._path)
        shutil.rmtree(old)
        pending.unlink()
        _fsync_dir(self._path)
        return qe.EdgeShard.load(str(here), self._config())

    def _settle_swap(self) -> None:
        """At open, a scrub interrupted between its renames or before deleting the old shard
        is finished; a half-built new shard is discarded (`scrub.pending` stays: the scrub is
        run again)."""
        here, fresh_dir, old = (self._path / n for n in (SHARD, NEXT, OLD))
        if not (fresh_dir.exists() or old.exists()):
            return
        if old.exists() and not here.exists():
            # the new shard was closed complete before the first rename
            os.replace(fresh_dir if fresh_dir.exists() else old, here)
        for leftover in (fresh_dir, old):
            if leftover.exists():
                shutil.rmtree(leftover)
        _fsync_dir(self._path)

    def count(self, kind: Kind, tenant: str, space: str | None) -> int:
        request = qe.CountRequest(exact=True, filter=self._scope(kind, tenant, space))
        with self._gate.shared():
            return int(self._shard.count(request))

    def close(self) -> None:
        with self._gate.exclusive(), self._lock:
            if self._opened is not None:
                try:
                    self._opened.flush()
                    self._flushes.flushed_all()
                finally:
                    self._opened.close()
                    self._opened = None
                    self._flushes.reloaded("the store was closed before its flush")
            self._release_ownership()
