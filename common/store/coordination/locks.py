"""One lock per space, held by a token: SET NX PX to take it, compare-and-delete to give it
back, so a holder whose lock expired cannot release its successor's."""

from __future__ import annotations

import time
from typing import Protocol

import redis

from common.store import keys
from common.store.coordination.journal import Journal

_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end
return 0
"""


class SpaceLocks(Protocol):
    def acquire(self, tenant: str, space: str, token: str, ttl_ms: int) -> bool: ...
    def release(self, tenant: str, space: str, token: str) -> None:
        """Give the lock back if `token` still holds it; otherwise do nothing."""
        ...


class RedisLocks:
    def __init__(self, client: redis.Redis) -> None:
        self._r = client
        self._release = client.register_script(_RELEASE)

    def acquire(self, tenant: str, space: str, token: str, ttl_ms: int) -> bool:
        return bool(self._r.set(keys.lock(tenant, space), token, nx=True, px=ttl_ms))

    def release(self, tenant: str, space: str, token: str) -> None:
        self._release(keys=[keys.lock(tenant, space)], args=[token])


class SqliteLocks:
    def __init__(self, journal: Journal) -> None:
        self._j = journal
        journal.create(
            "CREATE TABLE IF NOT EXISTS locks (tenant TEXT, space TEXT, token TEXT,"
            " expires REAL, PRIMARY KEY (tenant, space))"
        )

    def acquire(self, tenant: str, space: str, token: str, ttl_ms: int) -> bool:
        now = time.time()
        with self._j.locked() as db:
            row = db.execute(
                "SELECT expires FROM locks WHERE tenant=? AND space=?", (tenant, space)
            ).fetchone()
            if row is not None and row[0] > now:
                return False
            db.execute(
                "INSERT OR REPLACE INTO locks VALUES (?, ?, ?, ?)",
                (tenant, space, token, now + ttl_ms / 1000),
            )
        return True

    def release(self, tenant: str, space: str, token: str) -> None:
        self._j.run(
            "DELETE FROM locks WHERE tenant=? AND space=? AND token=?", tenant, space, token
        )

    def clear_locks(self) -> None:
        """Forget locks of an earlier process: the embedded store has one process at a time."""
        self._j.run("DELETE FROM locks")
