"""Saved space indexes, so that a fresh process opens a large embedded space in seconds.

Building a space's index from the store means turning every fact, event and profile (payload
and vector) into Python objects: 8 s for 100k facts on 2 cores on a quiet day, 44 s on a slow
one. The owning process of an embedded store therefore keeps a copy of each large index on
disk (pickled, with the graph structures derived from it, each record packed on its own and
read when first used: `common/store/packed.py`) and the next process loads that instead.

A saved index is only ever used while it is known to match the store:
- the store deletes a space's saved index *before* it writes any fact, event or profile of
  that space (so a crash between the two leaves no stale copy behind);
- the file names the code that wrote it (the versions of the package and of the libraries
  whose objects it pickles, and a hash of the modules whose classes it holds); a copy from
  other code is ignored;
- on load, the record counts per kind must equal the store's.
Anything else falls back to reading the store. Only the process that owns the store (it holds
the directory's lock) reads or writes these files.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
import threading
from importlib import metadata
from pathlib import Path
from typing import Any

from common.models import ids
from common.store import longlived

FORMAT = 1
SUFFIX = ".index"


def _code_stamp() -> str:
    """The package version and the source of the modules a pickled index refers to."""
    common = Path(__file__).resolve().parents[1]
    sources = (
        "store/space_index.py",
        "store/packed.py",
        "postings.py",
        "models/memory.py",
        "retrieval/graph.py",
        "text/lexical.py",
        "text/keywords.py",
        "text/stopwords.txt",
    )
    digest = hashlib.sha256(f"{FORMAT}".encode())
    for package in ("atommem", "pydantic", "numpy", "scipy"):  # what the pickles are made of
        with contextlib.suppress(metadata.PackageNotFoundError):
            digest.update(metadata.version(package).encode())
    for name in sources:
        digest.update(name.encode())
        digest.update((common / name).read_bytes())
    return digest.hexdigest()


class IndexSnapshots:
    """The saved indexes of one embedded store, one file per space."""

    def __init__(self, directory: Path) -> None:
        self._dir = directory
        self._stamp: str | None = None
        self._lock = threading.Lock()
        self._present: set[str] = set()
        self._scanned = False
        self._generations: dict[str, int] = {}  # space file → writes seen by this process
        self._held: dict[str, int] = {}  # space file → `together()` blocks yet to flush it

    def _stamp_now(self) -> str:
        if self._stamp is None:
            self._stamp = _code_stamp()
        return self._stamp

    def path(self, tenant: str, space: str) -> Path:
        return self._dir / f"{ids.space_id(tenant, space)}{SUFFIX}"

    def _scan(self) -> None:
        if not self._scanned:
            if self._dir.is_dir():
                self._present = {p.name for p in self._dir.iterdir() if p.suffix == SUFFIX}
            self._scanned = True

    def generation(self, tenant: str, space: str) -> int:
        """Moves on every write to the space's memory: an index read from the store may be
        saved only if no write came while it was read."""
        with self._lock:
            return self._generations.get(self.path(tenant, space).name, 0)

    def written(self, tenant: str, space: str, held: bool = False) -> None:
        """A write to the space's memory ended (landed or not): an index read while it was
        under way may hold half of it, so what was read before now may not be saved.
        `held`: the writes of a `together()` that `hold` held back, now flushed (or failed)."""
        name = self.path(tenant, space).name
        with self._lock:
            self._generations[name] = self._generations.get(name, 0) + 1
            if held:
                left = self._held.pop(name, 0) - 1
                if left > 0:
                    self._held[name] = left

    def hold(self, tenant: str, space: str) -> None:
        """A write to the space's memory is applied but waits for its `together()` to flush
        it: no index of the space is saved until `written(..., held=True)`, so a saved copy
        is never ahead of what the disk holds."""
        name = self.path(tenant, space).name
        with self._lock:
            self._held[name] = self._held.get(name, 0) + 1

    def invalidate(self, tenant: str, space: str) -> None:
        """Forget the space's saved index (called before every write to its memory)."""
        target = self.path(tenant, space)
        with self._lock:
            self._generations[target.name] = self._generations.get(target.name, 0) + 1
            self._scan()
            if target.name not in self._present:
                return
            target.unlink(missing_ok=True)
            self._present.discard(target.name)

    def load(self, tenant: str, space: str, counts: dict[str, int]) -> Any | None:
        """The saved index of the space if it matches the store's `counts`, else None."""
        target = self.path(tenant, space)
        with self._lock:
            self._scan()
            if target.name not in self._present:
                return None
        try:
            with open(target, "rb") as handle, longlived.building():
                header = pickle.load(handle)
                if header != {"stamp": self._stamp_now(), "counts": counts}:
                    return None
                return pickle.load(handle)
        except Exception:  # unreadable or damaged: read the store instead, and drop the file
            with self._lock, contextlib.suppress(OSError):
                target.unlink()
                self._present.discard(target.name)
            return None

    def save(
        self, tenant: str, space: str, index: Any, counts: dict[str, int], generation: int
    ) -> bool:
        """Write the index next to the store (atomically: a crash leaves the old file or none)
        unless the space was written since `generation` was read or a write to it waits for
        its flush (`hold`); True if written."""
        target = self.path(tenant, space)
        with self._lock:
            if self._held.get(target.name) or self._generations.get(target.name, 0) != generation:
                return False
        self._dir.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        with open(tmp, "wb") as handle:
            pickle.dump({"stamp": self._stamp_now(), "counts": counts}, handle, protocol=5)
            pickle.dump(index, handle, protocol=5)
            handle.flush()
            os.fsync(handle.fileno())
        with self._lock:
            if self._generations.get(target.name, 0) != generation:
                tmp.unlink(missing_ok=True)
                return False
            os.replace(tmp, target)
            self._present.add(target.name)
        return True
