"""Chunk parking: each extracted chunk's drafts wait here until the session's set is whole.

A parked chunk is the JSON of its drafts, their vectors packed (base64 float32, see
`common.models.plan`). Parking is idempotent (keyed by chunk number), so a redelivered chunk
counts once. Drafts are text drawn from a session: they go when the session commits, fails
or is erased, and in Redis they expire `PARKED_TTL_S` after the last chunk was parked in any
case (an abandoned session's drafts must not live as long as its job record). A session still
waiting for its commit after that is extracted again when its job is retried.
"""

from __future__ import annotations

from typing import Any, Protocol

import redis

from common.store import keys
from common.store.coordination.journal import Journal

PARKED_TTL_S = 24 * 3600


class ChunkParking(Protocol):
    def put_chunk(
        self, tenant: str, space: str, session_id: str, chunk: int, of: int, data: str
    ) -> int:
        """Park chunk `chunk` of `of`; returns how many chunks of the session are parked."""
        ...

    def parked(self, tenant: str, space: str, session_id: str) -> dict[int, int]:
        """Which chunks are parked (chunk → of), without reading their drafts."""
        ...

    def get_chunks(self, tenant: str, space: str, session_id: str) -> dict[int, str]: ...
    def drop_chunk(self, tenant: str, space: str, session_id: str, chunk: int) -> None: ...
    def drop_chunks(self, tenant: str, space: str, session_id: str) -> None: ...


class RedisChunks:
    """One hash per session ("chunk/of" → drafts), expiring a day after its last chunk
    was parked (or with the job, if that is sooner)."""

    def __init__(self, client: redis.Redis, job_ttl_s: int) -> None:
        self._r = client
        self._ttl = min(job_ttl_s, PARKED_TTL_S)

    def put_chunk(
        self, tenant: str, space: str, session_id: str, chunk: int, of: int, data: str
    ) -> int:
        key = keys.chunks(tenant, space, session_id)
        pipe = self._r.pipeline()
        pipe.hset(key, f"{chunk}/{of}", data)
        pipe.expire(key, self._ttl)
        pipe.hlen(key)
        return int(pipe.execute()[-1])

    def parked(self, tenant: str, space: str, session_id: str) -> dict[int, int]:
        fields = self._r.hkeys(keys.chunks(tenant, space, session_id))
        return {int(f.split("/")[0]): int(f.split("/")[1]) for f in map(str, fields)}

    def get_chunks(self, tenant: str, space: str, session_id: str) -> dict[int, str]:
        raw = self._r.hgetall(keys.chunks(tenant, space, session_id))
        return {int(str(k).split("/")[0]): str(v) for k, v in raw.items()}

    def drop_chunk(self, tenant: str, space: str, session_id: str, chunk: int) -> None:
        key = keys.chunks(tenant, space, session_id)
        fields = [f for f in map(str, self._r.hkeys(key)) if f.split("/")[0] == str(chunk)]
        if fields:
            self._r.hdel(key, *fields)

    def drop_chunks(self, tenant: str, space: str, session_id: str) -> None:
        self._r.delete(keys.chunks(tenant, space, session_id))


class SqliteChunks:
    def __init__(self, journal: Journal) -> None:
        self._j = journal
        journal.create(
            "CREATE TABLE IF NOT EXISTS parked_chunks (tenant TEXT, space TEXT,"
            " session_id TEXT, chunk INTEGER, of INTEGER, data TEXT,"
            " PRIMARY KEY (tenant, space, session_id, chunk))"
        )

    def put_chunk(
        self, tenant: str, space: str, session_id: str, chunk: int, of: int, data: str
    ) -> int:
        with self._j.locked() as db:
            db.execute(
                "INSERT OR REPLACE INTO parked_chunks VALUES (?, ?, ?, ?, ?, ?)",
                (tenant, space, session_id, chunk, of, data),
            )
            row = db.execute(
                "SELECT COUNT(*) FROM parked_chunks WHERE tenant=? AND space=? AND session_id=?",
                (tenant, space, session_id),
            ).fetchone()
        return int(row[0])

    def _rows(self, columns: str, tenant: str, space: str, session_id: str) -> list[Any]:
        return self._j.rows(
            f"SELECT {columns} FROM parked_chunks WHERE tenant=? AND space=? AND session_id=?",
            tenant,
            space,
            session_id,
        )

    def parked(self, tenant: str, space: str, session_id: str) -> dict[int, int]:
        return {int(c): int(o) for c, o in self._rows("chunk, of", tenant, space, session_id)}

    def get_chunks(self, tenant: str, space: str, session_id: str) -> dict[int, str]:
        return {int(c): str(d) for c, d in self._rows("chunk, data", tenant, space, session_id)}

    def drop_chunk(self, tenant: str, space: str, session_id: str, chunk: int) -> None:
        self._j.run(
            "DELETE FROM parked_chunks WHERE tenant=? AND space=? AND session_id=? AND chunk=?",
            tenant,
            space,
            session_id,
            chunk,
        )

    def drop_chunks(self, tenant: str, space: str, session_id: str) -> None:
        self._j.run(
            "DELETE FROM parked_chunks WHERE tenant=? AND space=? AND session_id=?",
            tenant,
            space,
            session_id,
        )
