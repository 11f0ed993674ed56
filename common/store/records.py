"""Space and session records in the store: the registry of spaces and the raw sessions."""

from __future__ import annotations

from datetime import UTC, datetime

from common.errors import SpaceExists, UnknownSpace
from common.models import ids
from common.models.session import SessionRecord, SpaceRecord
from common.store.base import Kind, Point, Store


def get_space(store: Store, tenant: str, space: str) -> SpaceRecord | None:
    found = store.retrieve(Kind.SPACES, tenant, space, [ids.space_id(tenant, space)])
    return SpaceRecord.model_validate(found[0].payload) if found else None


def require_space(store: Store, tenant: str, space: str) -> SpaceRecord:
    record = get_space(store, tenant, space)
    if record is None:
        raise UnknownSpace(tenant, space)
    return record


def put_space(store: Store, record: SpaceRecord) -> None:
    store.upsert(
        Kind.SPACES,
        [
            Point(
                id=ids.space_id(record.tenant, record.space), payload=record.model_dump(mode="json")
            )
        ],
    )


def create_space(store: Store, tenant: str, space: str, exist_ok: bool = False) -> SpaceRecord:
    if not space.strip() or len(space) > 128 or "/" in space:
        raise ValueError(f"invalid space name {space!r}: 1-128 characters, no '/'")
    existing = get_space(store, tenant, space)
    if existing is not None:
        if exist_ok:
            return existing
        raise SpaceExists(f"space {space!r} already exists for tenant {tenant!r}")
    record = SpaceRecord(tenant=tenant, space=space, created_at=datetime.now(UTC))
    put_space(store, record)
    return record


def list_spaces(store: Store, tenant: str) -> list[SpaceRecord]:
    records = [
        SpaceRecord.model_validate(p.payload) for p in store.scroll(Kind.SPACES, tenant, None)
    ]
    return sorted(records, key=lambda r: r.space)


SPACE_KINDS = {
    "sessions": Kind.SESSIONS,
    "facts": Kind.FACTS,
    "events": Kind.EVENTS,
    "profiles": Kind.PROFILES,
}


def space_counts(store: Store, tenant: str, space: str) -> dict[str, int]:
    """How many sessions, facts, events and profiles the space holds."""
    return {name: store.count(kind, tenant, space) for name, kind in SPACE_KINDS.items()}


def get_session(store: Store, tenant: str, space: str, session_id: str) -> SessionRecord | None:
    point_id = ids.session_point_id(tenant, space, session_id)
    found = store.retrieve(Kind.SESSIONS, tenant, space, [point_id])
    return SessionRecord.model_validate(found[0].payload) if found else None


def session_point(record: SessionRecord) -> tuple[Kind, Point]:
    """The session record as a store point, to write along with other points."""
    point_id = ids.session_point_id(record.tenant, record.space, record.session.session_id)
    return Kind.SESSIONS, Point(id=point_id, payload=record.model_dump(mode="json"))


def put_session(store: Store, record: SessionRecord) -> None:
    kind, point = session_point(record)
    store.upsert(kind, [point])


def list_sessions(store: Store, tenant: str, space: str) -> list[SessionRecord]:
    records = [
        SessionRecord.model_validate(p.payload) for p in store.scroll(Kind.SESSIONS, tenant, space)
    ]
    return sorted(records, key=lambda r: r.seq)


def delete_session(store: Store, tenant: str, space: str, session_id: str) -> None:
    store.delete(Kind.SESSIONS, tenant, space, [ids.session_point_id(tenant, space, session_id)])
