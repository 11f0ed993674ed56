"""Copy one space between two stores (Edge directory or Qdrant server, either way) with its
ids, payloads and vectors unchanged, so that moving to a server needs no re-ingest.

Only committed memory is copied: the space record and its sessions, facts, events and
profiles. Job, sequence and extraction state stays behind, so a space with a session that is
not finished (anything but `done` with no plan) is refused: on the target nothing would
finish it.

The space record is written last, after every other kind has been copied and counted: a
target without the space record holds no complete space. An interrupted copy leaves points
but no space record; running the copy again clears those leftovers and copies from the start,
so what the target ends with is always one consistent read of the source.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from common.errors import Conflict, UnknownSpace
from common.models import ids
from common.models.session import SessionRecord
from common.store.base import VECTOR_KINDS, Kind, Point, Store, StoreError

BATCH = 512
# Sessions first and the space record last; `verify` counts these kinds.
CONTENT_KINDS = (Kind.SESSIONS, Kind.FACTS, Kind.EVENTS, Kind.PROFILES)

Progress = Callable[[Kind, int, int], None]
"""Called after each batch with the kind, points of it copied so far, and its total."""


class TransferError(StoreError):
    """The copy did not arrive whole; the message names the kind and both counts."""


@dataclass
class TransferReport:
    """What one copy did: points per kind, and leftovers it cleared from the target."""

    copied: dict[Kind, int] = field(default_factory=dict)
    cleared: int = 0
    replaced: bool = False


def unfinished_sessions(store: Store, tenant: str, space: str) -> list[SessionRecord]:
    """Sessions of the space whose commit is not finished (the copy would strand them)."""
    out = []
    for point in store.scroll(Kind.SESSIONS, tenant, space):
        record = SessionRecord.model_validate(point.payload)
        if record.status != "done" or record.plan is not None:
            out.append(record)
    return sorted(out, key=lambda r: r.seq)


def _same_place(a: str, b: str) -> bool:
    if "://" in a or "://" in b:
        return a.rstrip("/") == b.rstrip("/")
    return Path(a).resolve() == Path(b).resolve()


def _batches(points: Iterator[Point], size: int) -> Iterator[list[Point]]:
    batch: list[Point] = []
    for point in points:
        batch.append(point)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def _clear(store: Store, tenant: str, space: str) -> int:
    """Delete the space from a store, its record first so that no half-deleted space looks
    whole; returns how many content points it held."""
    store.delete(Kind.SPACES, tenant, space, [ids.space_id(tenant, space)])
    held = 0
    for kind in CONTENT_KINDS:
        count = store.count(kind, tenant, space)
        if count:
            held += count
            store.delete_scope(kind, tenant, space)
    return held


def copy_space(
    source: Store,
    target: Store,
    tenant: str,
    space: str,
    *,
    replace: bool = False,
    batch: int = BATCH,
    on_progress: Progress | None = None,
) -> TransferReport:
    """Copy the tenant's space from `source` to `target`, page by page (at most `batch`
    points in hand), and check every kind's count on the target before writing the space
    record. Refuses an unknown space, a space with unfinished sessions, and a target that
    already holds the space (unless `replace`, which deletes it there first)."""
    if _same_place(source.location, target.location):
        raise Conflict(f"the source and the target are the same store ({source.location})")
    space_key = ids.space_id(tenant, space)
    found = source.retrieve(Kind.SPACES, tenant, space, [space_key])
    if not found:
        raise UnknownSpace(tenant, space)
    space_point = found[0]
    unfinished = unfinished_sessions(source, tenant, space)
    if unfinished:
        names = ", ".join(f"{r.session.session_id} ({r.status})" for r in unfinished[:5])
        more = f" and {len(unfinished) - 5} more" if len(unfinished) > 5 else ""
        raise Conflict(
            f"space {space!r} has {len(unfinished)} unfinished sessions ({names}{more}); "
            "only committed memory is copied: let them finish (`atommem resume`, "
            "`atommem job retry JOB_ID`) or erase them (`atommem delete --session ID`), then "
            "copy again"
        )

    report = TransferReport()
    if target.retrieve(Kind.SPACES, tenant, space, [space_key]):
        if not replace:
            raise Conflict(
                f"space {space!r} of tenant {tenant!r} already exists at {target.location}; "
                "pass --replace to delete it there and copy it again"
            )
        report.replaced = True
        _clear(target, tenant, space)
    else:
        # no space record: whatever the target holds of the space an interrupted copy left
        report.cleared = _clear(target, tenant, space)

    totals = {kind: source.count(kind, tenant, space) for kind in CONTENT_KINDS}
    for kind in CONTENT_KINDS:
        done = 0
        if on_progress is not None:
            on_progress(kind, done, totals[kind])
        points = source.scroll(kind, tenant, space, with_vectors=kind in VECTOR_KINDS)
        for chunk in _batches(points, batch):
            target.write([(kind, p) for p in chunk])
            done += len(chunk)
            if on_progress is not None:
                on_progress(kind, done, totals[kind])
        report.copied[kind] = done

    for kind in CONTENT_KINDS:
        at_source = source.count(kind, tenant, space)
        at_target = target.count(kind, tenant, space)
        if not at_source == at_target == report.copied[kind]:
            raise TransferError(
                f"{kind.value}: {at_source} at the source ({source.location}), {at_target} at "
                f"the target ({target.location}) after copying {report.copied[kind]}; the "
                f"space record was not written, so the target holds no space {space!r}: "
                "copy again (the source changed during the copy, or a write failed)"
            )
    # A server source can be written during the copy: a stage that began meanwhile would leave
    # a mixed copy with equal counts, so the space record is written only if none did.
    late = unfinished_sessions(source, tenant, space)
    if late:
        names = ", ".join(f"{r.session.session_id} ({r.status})" for r in late[:5])
        raise TransferError(
            f"sessions of space {space!r} began committing during the copy ({names}); the "
            f"space record was not written, so the target holds no space {space!r}: let "
            "them finish and copy again"
        )
    target.upsert(Kind.SPACES, [space_point])
    report.copied[Kind.SPACES] = 1
    return report
