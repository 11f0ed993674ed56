"""Per-space ordering: sessions wait in their space's sequence and commit from its head."""

from __future__ import annotations

from typing import Protocol

import redis

from common.store import keys
from common.store.coordination.journal import Journal


class SpaceSequence(Protocol):
    def register(self, tenant: str, space: str, session_id: str, seq: int) -> None: ...
    def unregister(self, tenant: str, space: str, session_id: str) -> None: ...
    def head(self, tenant: str, space: str) -> str | None:
        """The session to commit next (lowest seq), or None when the space has none."""
        ...

    def first(self, tenant: str, space: str, count: int) -> list[str]:
        """The next `count` sessions to commit (fewer when fewer wait), in order."""
        ...

    def pending(self, tenant: str, space: str) -> list[str]: ...
    def forget(self, tenant: str, space: str) -> None:
        """Drop the space's sequence (after its erasure)."""
        ...


class RedisSequence:
    """One sorted set per space, scored by session order."""

    def __init__(self, client: redis.Redis) -> None:
        self._r = client

    def register(self, tenant: str, space: str, session_id: str, seq: int) -> None:
        self._r.zadd(keys.pending(tenant, space), {session_id: seq})

    def unregister(self, tenant: str, space: str, session_id: str) -> None:
        self._r.zrem(keys.pending(tenant, space), session_id)

    def head(self, tenant: str, space: str) -> str | None:
        first = self.first(tenant, space, 1)
        return first[0] if first else None

    def first(self, tenant: str, space: str, count: int) -> list[str]:
        return [str(m) for m in self._r.zrange(keys.pending(tenant, space), 0, count - 1)]

    def pending(self, tenant: str, space: str) -> list[str]:
        return [str(m) for m in self._r.zrange(keys.pending(tenant, space), 0, -1)]

    def forget(self, tenant: str, space: str) -> None:
        self._r.delete(keys.pending(tenant, space))


class SqliteSequence:
    def __init__(self, journal: Journal) -> None:
        self._j = journal
        journal.create(
            "CREATE TABLE IF NOT EXISTS pending (tenant TEXT, space TEXT, session_id TEXT,"
            " seq INTEGER, PRIMARY KEY (tenant, space, session_id))"
        )

    def register(self, tenant: str, space: str, session_id: str, seq: int) -> None:
        self._j.run(
            "INSERT OR REPLACE INTO pending VALUES (?, ?, ?, ?)", tenant, space, session_id, seq
        )

    def unregister(self, tenant: str, space: str, session_id: str) -> None:
        self._j.run(
            "DELETE FROM pending WHERE tenant=? AND space=? AND session_id=?",
            tenant,
            space,
            session_id,
        )

    def head(self, tenant: str, space: str) -> str | None:
        first = self.first(tenant, space, 1)
        return first[0] if first else None

    def first(self, tenant: str, space: str, count: int) -> list[str]:
        rows = self._j.rows(
            "SELECT session_id FROM pending WHERE tenant=? AND space=? "
            "ORDER BY seq, session_id LIMIT ?",
            tenant,
            space,
            count,
        )
        return [str(r[0]) for r in rows]

    def pending(self, tenant: str, space: str) -> list[str]:
        rows = self._j.rows(
            "SELECT session_id FROM pending WHERE tenant=? AND space=? ORDER BY seq",
            tenant,
            space,
        )
        return [str(r[0]) for r in rows]

    def forget(self, tenant: str, space: str) -> None:
        self._j.run("DELETE FROM pending WHERE tenant=? AND space=?", tenant, space)
