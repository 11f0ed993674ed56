"""API keys and tenants, kept in Redis. A key is shown once, when created; only its
SHA-256 is stored (keys are 256-bit random, so a plain hash is enough)."""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import time
from dataclasses import dataclass

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


class KeyStore:
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
        record = {"name": name, "created_at": time.time()}
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
        key = KEY_PREFIX + secrets.token_urlsafe(32)
        key_id = secrets.token_hex(6)
        record = {"tenant": tenant, "key_id": key_id, "created_at": time.time()}
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
