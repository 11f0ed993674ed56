"""Per-space version counters: a writer bumps the space's version after each commit, and a
process whose cached index is older reloads it from the store."""

from __future__ import annotations

from typing import Protocol

import redis

from common.store import keys
from common.store.coordination.journal import Journal


class VersionCounter(Protocol):
    def version(self, tenant: str, space: str) -> int: ...
    def bump_version(self, tenant: str, space: str) -> int: ...
    def forget(self, tenant: str, space: str) -> None:
        """Drop the space's counter (after its erasure)."""
        ...


class RedisVersions:
    def __init__(self, client: redis.Redis) -> None:
        self._r = client

    def version(self, tenant: str, space: str) -> int:
        return int(self._r.get(keys.version(tenant, space)) or 0)

    def bump_version(self, tenant: str, space: str) -> int:
        return int(self._r.incr(keys.version(tenant, space)))

    def forget(self, tenant: str, space: str) -> None:
        self._r.delete(keys.version(tenant, space))


class SqliteVersions:
    def __init__(self, journal: Journal) -> None:
        self._j = journal
        journal.create(
            "CREATE TABLE IF NOT EXISTS versions (tenant TEXT, space TEXT, v INTEGER,"
            " PRIMARY KEY (tenant, space))"
        )

    def version(self, tenant: str, space: str) -> int:
        return int(
            self._j.one("SELECT v FROM versions WHERE tenant=? AND space=?", tenant, space) or 0
        )

    def bump_version(self, tenant: str, space: str) -> int:
        with self._j.locked() as db:
            db.execute(
                "INSERT INTO versions VALUES (?, ?, 1) "
                "ON CONFLICT(tenant, space) DO UPDATE SET v = v + 1",
                (tenant, space),
            )
            row = db.execute(
                "SELECT v FROM versions WHERE tenant=? AND space=?", (tenant, space)
            ).fetchone()
        return int(row[0])

    def forget(self, tenant: str, space: str) -> None:
        self._j.run("DELETE FROM versions WHERE tenant=? AND space=?", tenant, space)
