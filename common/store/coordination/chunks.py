"""Chunk parking: each extracted chunk's drafts wait here until the session's set is whole.

A parked chunk is the JSON of its drafts, their vectors packed (base64 float32, see
`common.models.plan`). Parking is idempotent (keyed by chunk number), so a redelivered chunk
counts once. Drafts are text drawn from a session: they go when the session commits, fails
or is erased, and in Redis they expire `PARKED_TTL_S` after the last chunk was parked in any
case (an abandoned session's drafts must not live as long as its job record). A session still
waiting for its commit after that is extracted again when its job is retried.

Beside a chunk's drafts each model call of it that succeeded is parked as it returns
(`put_call`, keyed by a digest of its prompt), so a chunk task re-queued for its budget or
an outage, or failed and sent again, replays those calls rather than paying for them twice.
They go with the chunks (`drop_chunks`) and expire with them; a failed job keeps them. A
call is parked only while its job still holds its payload, checked in the same atomic
write: an erasure drops the payload first, so a call returning after it writes nothing.
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
    def put_call(
        self,
        tenant: str,
        space: str,
        session_id: str,
        chunk: int,
        key: str,
        data: str,
        *,
        job_id: str,
    ) -> bool:
        """Park one model call of chunk `chunk` that succeeded, under its prompt's digest,
        if job `job_id` still holds its payload (not erased); whether it was parked."""
        ...

    def get_calls(
        self, tenant: str, space: str, session_id: str, chunk: int | None = None
    ) -> dict[tuple[int, str], str]:
        """The session's parked calls (of one chunk, when given): (chunk, digest) → the
        call's answer."""
        ...

    def drop_chunk(self, tenant: str, space: str, session_id: str, chunk: int) -> None: ...
    def drop_chunks(self, tenant: str, space: str, session_id: str) -> None: ...


CALL = "call:"
# KEYS: the session's hash, its job's payload; ARGV: field, answer, ttl. The payload's
# existence and the write in one step: an erasure drops the payload before the hash.
_PUT_CALL = """
if redis.call('exists', KEYS[2]) == 0 then return 0 end
redis.call('hset', KEYS[1], ARGV[1], ARGV[2])
redis.call('expire', KEYS[1], ARGV[3])
return 1
"""


def _is_chunk(field: str) -> bool:
    return not field.startswith(CALL)


class RedisChunks:
    """One hash per session ("chunk/of" → drafts, "call:chunk:digest" → a call's answer),
    expiring a day after its last write (or with the job, if that is sooner)."""

    def __init__(self, client: redis.Redis, job_ttl_s: int) -> None:
        self._r = client
        self._ttl = min(job_ttl_s, PARKED_TTL_S)
        self._put_call = client.register_script(_PUT_CALL)

    def put_chunk(
        self, tenant: str, space: str, session_id: str, chunk: int, of: int, data: str
    ) -> int:
        key = keys.chunks(tenant, space, session_id)
        pipe = self._r.pipeline()
        pipe.hset(key, f"{chunk}/{of}", data)
        pipe.expire(key, self._ttl)
        pipe.hkeys(key)
        return sum(1 for f in map(str, pipe.execute()[-1]) if _is_chunk(f))

    def parked(self, tenant: str, space: str, session_id: str) -> dict[int, int]:
        fields = list(map(str, self._r.hkeys(keys.chunks(tenant, space, session_id))))
        return {int(f.split("/")[0]): int(f.split("/")[1]) for f in fields if _is_chunk(f)}

    def get_chunks(self, tenant: str, space: str, session_id: str) -> dict[int, str]:
        raw = self._r.hgetall(keys.chunks(tenant, space, session_id))
        return {int(str(k).split("/")[0]): str(v) for k, v in raw.items() if _is_chunk(str(k))}

    def put_call(
        self,
        tenant: str,
        space: str,
        session_id: str,
        chunk: int,
        key: str,
        data: str,
        *,
        job_id: str,
    ) -> bool:
        names = [keys.chunks(tenant, space, session_id), keys.job_payload(tenant, job_id)]
        return bool(self._put_call(keys=names, args=[f"{CALL}{chunk}:{key}", data, self._ttl]))

    def get_calls(
        self, tenant: str, space: str, session_id: str, chunk: int | None = None
    ) -> dict[tuple[int, str], str]:
        match = f"{CALL}{'*' if chunk is None else chunk}:*"
        out = {}
        for field, value in self._r.hscan_iter(keys.chunks(tenant, space, session_id), match):
            number, digest = str(field).removeprefix(CALL).split(":", 1)
            out[(int(number), digest)] = str(value)
        return out

    def drop_chunk(self, tenant: str, space: str, session_id: str, chunk: int) -> None:
        key = keys.chunks(tenant, space, session_id)
        fields = [
            f
            for f in map(str, self._r.hkeys(key))
            if f.split("/")[0] == str(chunk) or f.startswith(f"{CALL}{chunk}:")
        ]
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
        with journal.locked() as db:  # a file from before calls were keyed by chunk too
            pk = [r[1] for r in db.execute("PRAGMA table_info(parked_calls)") if r[5]]
            if pk and "chunk" not in pk:  # its calls are only answers to ask for again
                db.execute("DROP TABLE parked_calls")
        # Keyed by chunk too: two chunks may ask the same call, and each keeps its own.
        journal.create(
            "CREATE TABLE IF NOT EXISTS parked_calls (tenant TEXT, space TEXT,"
            " session_id TEXT, chunk INTEGER, digest TEXT, data TEXT,"
            " PRIMARY KEY (tenant, space, session_id, chunk, digest))"
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

    def put_call(
        self,
        tenant: str,
        space: str,
        session_id: str,
        chunk: int,
        key: str,
        data: str,
        *,
        job_id: str,
    ) -> bool:
        # One statement: the job's payload (the jobs table of the same journal, SqliteJobs)
        # is checked and the call written together.
        with self._j.locked() as db:
            written = db.execute(
                "INSERT OR REPLACE INTO parked_calls SELECT ?, ?, ?, ?, ?, ? WHERE EXISTS"
                " (SELECT 1 FROM jobs WHERE tenant=? AND job_id=?"
                " AND payload IS NOT NULL AND payload != '')",
                (tenant, space, session_id, chunk, key, data, tenant, job_id),
            ).rowcount
        return written > 0

    def get_calls(
        self, tenant: str, space: str, session_id: str, chunk: int | None = None
    ) -> dict[tuple[int, str], str]:
        rows = self._j.rows(
            "SELECT chunk, digest, data FROM parked_calls"
            " WHERE tenant=? AND space=? AND session_id=?",
            tenant,
            space,
            session_id,
        )
        return {(int(c), str(k)): str(d) for c, k, d in rows if chunk in (None, c)}

    def drop_chunk(self, tenant: str, space: str, session_id: str, chunk: int) -> None:
        for table in ("parked_chunks", "parked_calls"):
            self._j.run(
                f"DELETE FROM {table} WHERE tenant=? AND space=? AND session_id=? AND chunk=?",
                tenant,
                space,
                session_id,
                chunk,
            )

    def drop_chunks(self, tenant: str, space: str, session_id: str) -> None:
        for table in ("parked_chunks", "parked_calls"):
            self._j.run(
                f"DELETE FROM {table} WHERE tenant=? AND space=? AND session_id=?",
                tenant,
                space,
                session_id,
            )
