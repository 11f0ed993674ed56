"""One lock per space, held by a token: SET NX PX to take it, compare-and-delete to give it
back, so a holder whose lock expired cannot release its successor's.

The TTL is short and the holding process renews the lock (compare-and-pexpire) every third
of it while the holder works: a live holder keeps it however long it works (up to a maximum
hold, so a hung task cannot keep it forever), a dead one loses it within one TTL.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol

import redis

from common.store import keys
from common.store.coordination.journal import Journal

_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end
return 0
"""
_RENEW = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end
return 0
"""


class SpaceLocks(Protocol):
    def acquire(self, tenant: str, space: str, token: str, ttl_ms: int) -> bool:
        """Take the lock for `token`; this process renews it until `release`."""
        ...

    def release(self, tenant: str, space: str, token: str) -> None:
        """Give the lock back if `token` still holds it; otherwise do nothing."""
        ...

    def held(self, tenant: str, space: str) -> bool:
        """Whether anyone (alive, since the lock expires without renewal) holds the lock."""
        ...

    def holds(self, tenant: str, space: str, token: str) -> bool:
        """Whether `token` still holds the lock (it may have lapsed: the holder stalled, or
        the backend was away past the TTL), checked before a holder writes."""
        ...


class LockLost(Exception):
    """The space's lock lapsed while its holder worked: it must not write, the lock's new
    holder (or a later drain) does the work."""


@dataclass(frozen=True)
class HeldLock:
    """A space's lock while a block holds it under its token."""

    locks: SpaceLocks
    tenant: str
    space: str
    token: str

    def check(self) -> None:
        """Raise LockLost if the lock lapsed (the holder stalled, or the backend was away past
        the TTL, and another may have taken the space): made before each write."""
        if not self.locks.holds(self.tenant, self.space, self.token):
            raise LockLost(f"the lock of space {self.space!r} lapsed before the write")


@contextmanager
def space_lock(
    locks: SpaceLocks, tenant: str, space: str, ttl_ms: int
) -> Iterator[HeldLock | None]:
    """The space's lock for the block, under a fresh token, renewed while held and given
    back when the block ends however it ends; None when another holds it (the caller tries
    again shortly rather than block a worker slot waiting)."""
    token = uuid.uuid4().hex
    if not locks.acquire(tenant, space, token, ttl_ms):
        yield None
        return
    try:
        yield HeldLock(locks, tenant, space, token)
    finally:
        locks.release(tenant, space, token)


Renew = Callable[[str, str, str, int], bool]
Release = Callable[[str, str, str], None]


class Renewer:
    """One daemon thread per process renewing the locks it holds, and giving back those whose
    release failed (the backend was briefly away) as soon as it answers again; started on
    first use."""

    def __init__(self, renew: Renew, release: Release, max_hold_s: float) -> None:
        self._renew = renew
        self._release = release
        self._max_hold_s = max_hold_s
        self._held: dict[tuple[str, str, str], tuple[int, float]] = {}
        self._unreleased: set[tuple[str, str, str]] = set()
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._thread: threading.Thread | None = None
        self._closed = False

    def hold(self, tenant: str, space: str, token: str, ttl_ms: int) -> None:
        with self._lock:
            self._held[(tenant, space, token)] = (ttl_ms, time.monotonic() + self._max_hold_s)
            self._start()

    def drop(self, tenant: str, space: str, token: str) -> None:
        with self._lock:
            self._held.pop((tenant, space, token), None)

    def release_later(self, tenant: str, space: str, token: str) -> None:
        """Give the lock back once the backend answers (compare-and-delete: never another's)."""
        with self._lock:
            self._held.pop((tenant, space, token), None)
            self._unreleased.add((tenant, space, token))
            self._start()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._held.clear()
            self._unreleased.clear()
            self._wake.notify()

    def _start(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._closed = False
            self._thread = threading.Thread(
                target=self._run, name="atommem-lock-renewer", daemon=True
            )
            self._thread.start()
        self._wake.notify()

    def _run(self) -> None:
        while True:
            with self._lock:
                if self._closed:
                    return
                if not self._held and not self._unreleased:
                    self._wake.wait(1.0)
                    continue
                periods = [ttl / 3000 for ttl, _ in self._held.values()]
                if self._unreleased:
                    periods.append(0.5)
                self._wake.wait(max(0.05, min(periods)))
                if self._closed:
                    return
                now = time.monotonic()
                for key in [k for k, (_, until) in self._held.items() if until <= now]:
                    del self._held[key]  # held past the maximum: let the TTL free it
                due = list(self._held.items())
                unreleased = list(self._unreleased)
            for key in unreleased:
                try:
                    self._release(*key)
                except Exception:  # still away: try again next period
                    continue
                with self._lock:
                    self._unreleased.discard(key)
            for (tenant, space, token), (ttl_ms, _) in due:
                try:
                    still = self._renew(tenant, space, token, ttl_ms)
                except Exception:  # the backend is briefly down: try again next period
                    continue
                if not still:  # lost (expired or taken over): stop renewing it
                    self.drop(tenant, space, token)


class RedisLocks:
    def __init__(self, client: redis.Redis, max_hold_s: float = 3600.0) -> None:
        self._r = client
        self._release = client.register_script(_RELEASE)
        self._renew = client.register_script(_RENEW)
        self.renewer = Renewer(self.renew, self._give_back, max_hold_s)

    def acquire(self, tenant: str, space: str, token: str, ttl_ms: int) -> bool:
        taken = bool(self._r.set(keys.lock(tenant, space), token, nx=True, px=ttl_ms))
        if taken:
            self.renewer.hold(tenant, space, token, ttl_ms)
        return taken

    def renew(self, tenant: str, space: str, token: str, ttl_ms: int) -> bool:
        """Extend the lock to `ttl_ms` from now if `token` still holds it."""
        return bool(self._renew(keys=[keys.lock(tenant, space)], args=[token, ttl_ms]))

    def release(self, tenant: str, space: str, token: str) -> None:
        """Give the lock back; if Redis is away, the renewer gives it back once it answers
        (a failed release must not keep the space waiting for the TTL, nor fail the task)."""
        self.renewer.drop(tenant, space, token)
        try:
            self._give_back(tenant, space, token)
        except (redis.ConnectionError, redis.TimeoutError):
            self.renewer.release_later(tenant, space, token)

    def _give_back(self, tenant: str, space: str, token: str) -> None:
        self._release(keys=[keys.lock(tenant, space)], args=[token])

    def held(self, tenant: str, space: str) -> bool:
        return bool(self._r.exists(keys.lock(tenant, space)))

    def holds(self, tenant: str, space: str, token: str) -> bool:
        return self._r.get(keys.lock(tenant, space)) == token

    def close(self) -> None:
        self.renewer.close()


class SqliteLocks:
    def __init__(self, journal: Journal, max_hold_s: float = 3600.0) -> None:
        self._j = journal
        journal.create(
            "CREATE TABLE IF NOT EXISTS locks (tenant TEXT, space TEXT, token TEXT,"
            " expires REAL, PRIMARY KEY (tenant, space))"
        )
        self.renewer = Renewer(self.renew, self._give_back, max_hold_s)

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
        self.renewer.hold(tenant, space, token, ttl_ms)
        return True

    def renew(self, tenant: str, space: str, token: str, ttl_ms: int) -> bool:
        with self._j.locked() as db:
            cur = db.execute(
                "UPDATE locks SET expires=? WHERE tenant=? AND space=? AND token=?",
                (time.time() + ttl_ms / 1000, tenant, space, token),
            )
            return cur.rowcount > 0

    def release(self, tenant: str, space: str, token: str) -> None:
        self.renewer.drop(tenant, space, token)
        self._give_back(tenant, space, token)

    def _give_back(self, tenant: str, space: str, token: str) -> None:
        self._j.run(
            "DELETE FROM locks WHERE tenant=? AND space=? AND token=?", tenant, space, token
        )

    def held(self, tenant: str, space: str) -> bool:
        expires = self._j.one("SELECT expires FROM locks WHERE tenant=? AND space=?", tenant, space)
        return expires is not None and float(expires) > time.time()

    def holds(self, tenant: str, space: str, token: str) -> bool:
        expires = self._j.one(
            "SELECT expires FROM locks WHERE tenant=? AND space=? AND token=?", tenant, space, token
        )
        return expires is not None and float(expires) > time.time()

    def clear_locks(self) -> None:
        """Forget locks of an earlier process: the embedded store has one process at a time."""
        self._j.run("DELETE FROM locks")

    def close(self) -> None:
        self.renewer.close()
