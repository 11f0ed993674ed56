"""API keys and tenants: in Redis beside the queues (`KeyStore`), or in a SQLite file beside
the embedded store (`LocalKeys`, for `atommem serve`). A key is shown once, when created; only
its SHA-256 is stored (keys are 256-bit random, so a plain hash is enough)."""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import sqlite3
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

import redis

from common.errors import Conflict, NotFound
from common.store import keys

KEY_PREFIX = "amk_"


def digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


@dataclass(frozen=True)
class Caller:
    """Who is calling: a tenant's key, or the admin."""

    tenant: str | None
    key_id: str | None = None
    admin: bool = False


def now_iso() -> str:
    """A tenant's or key's creation time, as spaces carry theirs (ISO 8601, UTC)."""
    return datetime.now(UTC).isoformat()


class Keys(Protocol):
    """Tenants, their keys and their writes per minute, wherever they are kept."""

    def identify(self, key: str) -> Caller | None: ...

    def create_tenant(self, name: str) -> dict[str, object]: ...

    def tenants(self) -> list[dict[str, object]]: ...

    def require_tenant(self, name: str) -> None: ...

    def create_key(self, tenant: str) -> dict[str, object]: ...

    def list_keys(self, tenant: str) -> list[dict[str, object]]: ...

    def revoke_key(self, tenant: str, key_id: str) -> None: ...

    def allow_write(self, tenant: str, per_minute: int) -> tuple[str, float | None]: ...

    def refund_write(self, counter: str) -> None: ...


def new_key() -> tuple[str, str]:
    """A fresh key and its id."""
    return KEY_PREFIX + secrets.token_urlsafe(32), secrets.token_hex(6)


class KeyStore:
    """Keys in Redis, shared by every API process of a deployment."""

    def __init__(self, client: redis.Redis, admin_key: str | None) -> None:
        self._r = client
        self._admin = digest(admin_key) if admin_key else None

    def identify(self, key: str) -> Caller | None:
        """The caller a key belongs to, or None for an unknown key."""
        if self._admin is not None and hmac.compare_digest(digest(key), self._admin):
            return Caller(tenant=None, admin=True)
        raw = self._r.get(keys.api_key(digest(key)))
        if raw is None:
            return None
        record = json.loads(raw)
        return Caller(tenant=record["tenant"], key_id=record["key_id"])

    def create_tenant(self, name: str) -> dict[str, object]:
        record: dict[str, object] = {"name": name, "created_at": now_iso()}
        if not self._r.set(keys.tenant(name), json.dumps(record), nx=True):
            raise Conflict(f"tenant {name!r} already exists")
        self._r.sadd(keys.TENANTS, name)
        return record

    def tenants(self) -> list[dict[str, object]]:
        names = sorted(str(n) for n in self._r.smembers(keys.TENANTS))
        return [json.loads(self._r.get(keys.tenant(n)) or "{}") for n in names]

    def require_tenant(self, name: str) -> None:
        if not self._r.exists(keys.tenant(name)):
            raise NotFound(f"no tenant {name!r}")

    def create_key(self, tenant: str) -> dict[str, object]:
        """A new key for the tenant; the only time the key itself is returned."""
        self.require_tenant(tenant)
        key, key_id = new_key()
        record = {"tenant": tenant, "key_id": key_id, "created_at": now_iso()}
        pipe = self._r.pipeline()
        pipe.set(keys.api_key(digest(key)), json.dumps(record))
        pipe.hset(keys.tenant_keys(tenant), key_id, digest(key))
        pipe.execute()
        return {**record, "api_key": key}

    def list_keys(self, tenant: str) -> list[dict[str, object]]:
        self.require_tenant(tenant)
        out = []
        for key_id, hashed in sorted(self._r.hgetall(keys.tenant_keys(tenant)).items()):
            raw = self._r.get(keys.api_key(str(hashed)))
            record = json.loads(raw) if raw else {"key_id": key_id}
            out.append({"key_id": str(key_id), "created_at": record.get("created_at")})
        return out

    def revoke_key(self, tenant: str, key_id: str) -> None:
        self.require_tenant(tenant)
        hashed = self._r.hget(keys.tenant_keys(tenant), key_id)
        if hashed is None:
            raise NotFound(f"no key {key_id!r} for tenant {tenant!r}")
        pipe = self._r.pipeline()
        pipe.delete(keys.api_key(str(hashed)))
        pipe.hdel(keys.tenant_keys(tenant), key_id)
        pipe.execute()

    def allow_write(self, tenant: str, per_minute: int) -> tuple[str, float | None]:
        """Count a write in this minute's window: the window's counter, and None when the
        write is allowed, else the seconds until the window resets (it is then not counted)."""
        now = time.time()
        window = int(now // 60)
        counter = keys.write_rate(tenant, window)
        pipe = self._r.pipeline()
        pipe.incr(counter)
        pipe.expire(counter, 120)
        count = int(pipe.execute()[0])
        if count <= per_minute:
            return counter, None
        self._r.decr(counter)
        return counter, (window + 1) * 60 - now

    def refund_write(self, counter: str) -> None:
        """Give back a write counted in `counter` that was then refused."""
        pipe = self._r.pipeline()
        pipe.decr(counter)
        pipe.expire(counter, 120)  # a slow refusal may outlive the window's own expiry
        pipe.execute()


class LocalKeys:
    """Keys in a SQLite file, for one API process over the embedded store (`atommem serve`).
    Writes per minute are counted in this process: the windows are a minute long, and a
    restart only forgets the current one."""

    def __init__(self, path: Path, admin_key: str | None) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS tenants (name TEXT PRIMARY KEY, created_at TEXT NOT NULL)"
        )
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS keys (digest TEXT PRIMARY KEY, tenant TEXT NOT NULL, "
            "key_id TEXT NOT NULL, created_at TEXT NOT NULL)"
        )
        self._lock = threading.Lock()
        self._admin = digest(admin_key) if admin_key else None
        self._writes: dict[str, int] = {}

    def close(self) -> None:
        self._db.close()

    def identify(self, key: str) -> Caller | None:
        if self._admin is not None and hmac.compare_digest(digest(key), self._admin):
            return Caller(tenant=None, admin=True)
        with self._lock:
            row = self._db.execute(
                "SELECT tenant, key_id FROM keys WHERE digest = ?", (digest(key),)
            ).fetchone()
        return Caller(tenant=row[0], key_id=row[1]) if row else None

    def create_tenant(self, name: str) -> dict[str, object]:
        record: dict[str, object] = {"name": name, "created_at": now_iso()}
        try:
            with self._lock:
                self._db.execute("INSERT INTO tenants VALUES (?, ?)", (name, record["created_at"]))
        except sqlite3.IntegrityError:
            raise Conflict(f"tenant {name!r} already exists") from None
        return record

    def tenants(self) -> list[dict[str, object]]:
        with self._lock:
            rows = self._db.execute("SELECT name, created_at FROM tenants ORDER BY name").fetchall()
        return [{"name": name, "created_at": created} for name, created in rows]

    def require_tenant(self, name: str) -> None:
        with self._lock:
            found = self._db.execute("SELECT 1 FROM tenants WHERE name = ?", (name,)).fetchone()
        if found is None:
            raise NotFound(f"no tenant {name!r}")

    def create_key(self, tenant: str) -> dict[str, object]:
        self.require_tenant(tenant)
        key, key_id = new_key()
        record = {"tenant": tenant, "key_id": key_id, "created_at": now_iso()}
        with self._lock:
            self._db.execute(
                "INSERT INTO keys VALUES (?, ?, ?, ?)",
                (digest(key), tenant, key_id, record["created_at"]),
            )
        return {**record, "api_key": key}

    def list_keys(self, tenant: str) -> list[dict[str, object]]:
        self.require_tenant(tenant)
        with self._lock:
            rows = self._db.execute(
                "SELECT key_id, created_at FROM keys WHERE tenant = ? ORDER BY key_id", (tenant,)
            ).fetchall()
        return [{"key_id": key_id, "created_at": created} for key_id, created in rows]

    def revoke_key(self, tenant: str, key_id: str) -> None:
        self.require_tenant(tenant)
        with self._lock:
            gone = self._db.execute(
                "DELETE FROM keys WHERE tenant = ? AND key_id = ?", (tenant, key_id)
            ).rowcount
        if not gone:
            raise NotFound(f"no key {key_id!r} for tenant {tenant!r}")

    def allow_write(self, tenant: str, per_minute: int) -> tuple[str, float | None]:
        now = time.time()
        window = int(now // 60)
        counter = keys.write_rate(tenant, window)
        with self._lock:
            for old in [c for c in self._writes if not c.endswith(f":{window}")]:
                del self._writes[old]  # only this minute's windows are kept
            if self._writes.get(counter, 0) >= per_minute:
                return counter, (window + 1) * 60 - now
            self._writes[counter] = self._writes.get(counter, 0) + 1
        return counter, None

    def refund_write(self, counter: str) -> None:
        with self._lock:
            if self._writes.get(counter, 0) > 0:
                self._writes[counter] -= 1
