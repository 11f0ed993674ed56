"""Job state, per-space sequencing, locks and version counters.

Redis holds them when a broker is configured; otherwise a SQLite file next to the store
journals them, so an interrupted embedded run finds its unfinished jobs again.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Protocol

import redis

from common.models.jobs import FINISHED, Job
from common.store import keys

WAIT_SAMPLES = 20_000

_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end
return 0
"""


class Coordinator(Protocol):
    def put_job(self, job: Job, payload: str) -> None: ...
    def get_job(self, tenant: str, job_id: str) -> Job | None: ...
    def job_payload(self, tenant: str, job_id: str) -> str | None: ...
    def update_job(self, tenant: str, job_id: str, **fields: Any) -> Job | None: ...
    def open_jobs(self) -> list[Job]: ...
    def register(self, tenant: str, space: str, session_id: str, seq: int) -> None: ...
    def unregister(self, tenant: str, space: str, session_id: str) -> None: ...
    def head(self, tenant: str, space: str) -> str | None: ...
    def pending(self, tenant: str, space: str) -> list[str]: ...
    def delete_job(self, tenant: str, job_id: str) -> None: ...
    def forget_space(self, tenant: str, space: str) -> None:
        """Drop the space's sequence and version counter (after its erasure)."""
        ...

    def put_chunk(
        self, tenant: str, space: str, session_id: str, chunk: int, of: int, data: str
    ) -> int:
        """Park chunk `chunk` of `of`; returns how many chunks of the session are parked."""
        ...

    def parked(self, tenant: str, space: str, session_id: str) -> dict[int, int]:
        """Which chunks are parked (chunk → of), without reading their drafts."""
        ...

    def get_chunks(self, tenant: str, space: str, session_id: str) -> dict[int, str]: ...
    def drop_chunks(self, tenant: str, space: str, session_id: str) -> None: ...
    def acquire(self, tenant: str, space: str, token: str, ttl_ms: int) -> bool: ...
    def release(self, tenant: str, space: str, token: str) -> None: ...
    def bump_version(self, tenant: str, space: str) -> int: ...
    def version(self, tenant: str, space: str) -> int: ...
    def record_wait(self, queue: str, seconds: float) -> None: ...
    def waits(self, queue: str) -> list[float]: ...


def _updated(job: Job, fields: dict[str, Any]) -> Job:
    return job.model_copy(update={**fields, "updated_at": time.time()})


class RedisCoordinator:
    """Coordination state in Redis (shared by every worker and producer)."""

    def __init__(self, url: str, job_ttl_s: int) -> None:
        self._r = redis.Redis.from_url(url, decode_responses=True)
        self._ttl = job_ttl_s
        self._release = self._r.register_script(_RELEASE)

    def put_job(self, job: Job, payload: str) -> None:
        pipe = self._r.pipeline()
        pipe.set(keys.job(job.tenant, job.job_id), job.model_dump_json(), ex=self._ttl)
        pipe.set(keys.job_payload(job.tenant, job.job_id), payload, ex=self._ttl)
        pipe.sadd(keys.OPEN_JOBS, f"{job.tenant}\x1f{job.job_id}")
        pipe.execute()

    def get_job(self, tenant: str, job_id: str) -> Job | None:
        raw = self._r.get(keys.job(tenant, job_id))
        return Job.model_validate_json(raw) if raw else None

    def job_payload(self, tenant: str, job_id: str) -> str | None:
        raw = self._r.get(keys.job_payload(tenant, job_id))
        return str(raw) if raw else None

    def update_job(self, tenant: str, job_id: str, **fields: Any) -> Job | None:
        job = self.get_job(tenant, job_id)
        if job is None:
            return None
        job = _updated(job, fields)
        pipe = self._r.pipeline()
        pipe.set(keys.job(tenant, job_id), job.model_dump_json(), ex=self._ttl)
        if job.state in FINISHED:
            pipe.srem(keys.OPEN_JOBS, f"{tenant}\x1f{job_id}")
        else:
            pipe.sadd(keys.OPEN_JOBS, f"{tenant}\x1f{job_id}")
        pipe.execute()
        return job

    def open_jobs(self) -> list[Job]:
        out = []
        for member in self._r.smembers(keys.OPEN_JOBS):
            tenant, job_id = str(member).split("\x1f", 1)
            job = self.get_job(tenant, job_id)
            if job is not None:
                out.append(job)
        return out

    def register(self, tenant: str, space: str, session_id: str, seq: int) -> None:
        self._r.zadd(keys.pending(tenant, space), {session_id: seq})

    def unregister(self, tenant: str, space: str, session_id: str) -> None:
        self._r.zrem(keys.pending(tenant, space), session_id)

    def head(self, tenant: str, space: str) -> str | None:
        first = self._r.zrange(keys.pending(tenant, space), 0, 0)
        return str(first[0]) if first else None

    def pending(self, tenant: str, space: str) -> list[str]:
        return [str(m) for m in self._r.zrange(keys.pending(tenant, space), 0, -1)]

    def delete_job(self, tenant: str, job_id: str) -> None:
        pipe = self._r.pipeline()
        pipe.delete(keys.job(tenant, job_id), keys.job_payload(tenant, job_id))
        pipe.srem(keys.OPEN_JOBS, f"{tenant}\x1f{job_id}")
        pipe.execute()

    def forget_space(self, tenant: str, space: str) -> None:
        self._r.delete(keys.pending(tenant, space), keys.version(tenant, space))

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

    def drop_chunks(self, tenant: str, space: str, session_id: str) -> None:
        self._r.delete(keys.chunks(tenant, space, session_id))

    def acquire(self, tenant: str, space: str, token: str, ttl_ms: int) -> bool:
        return bool(self._r.set(keys.lock(tenant, space), token, nx=True, px=ttl_ms))

    def release(self, tenant: str, space: str, token: str) -> None:
        self._release(keys=[keys.lock(tenant, space)], args=[token])

    def bump_version(self, tenant: str, space: str) -> int:
        return int(self._r.incr(keys.version(tenant, space)))

    def version(self, tenant: str, space: str) -> int:
        return int(self._r.get(keys.version(tenant, space)) or 0)

    def record_wait(self, queue: str, seconds: float) -> None:
        pipe = self._r.pipeline()
        pipe.lpush(keys.queue_wait(queue), f"{seconds:.6f}")
        pipe.ltrim(keys.queue_wait(queue), 0, WAIT_SAMPLES - 1)
        pipe.execute()

    def waits(self, queue: str) -> list[float]:
        return [float(v) for v in self._r.lrange(keys.queue_wait(queue), 0, -1)]


class SqliteCoordinator:
    """Coordination state for the embedded default: one process, journaled to a file."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._lock = threading.Lock()
        self._db.executescript(
            """
            PRAGMA journal_mode=WAL;
            CREATE TABLE IF NOT EXISTS jobs (tenant TEXT, job_id TEXT, body TEXT, payload TEXT,
                open INTEGER, PRIMARY KEY (tenant, job_id));
            CREATE TABLE IF NOT EXISTS pending (tenant TEXT, space TEXT, session_id TEXT,
                seq INTEGER, PRIMARY KEY (tenant, space, session_id));
            CREATE TABLE IF NOT EXISTS parked_chunks (tenant TEXT, space TEXT,
                session_id TEXT, chunk INTEGER, of INTEGER, data TEXT,
                PRIMARY KEY (tenant, space, session_id, chunk));
            CREATE TABLE IF NOT EXISTS locks (tenant TEXT, space TEXT, token TEXT,
                expires REAL, PRIMARY KEY (tenant, space));
            CREATE TABLE IF NOT EXISTS versions (tenant TEXT, space TEXT, v INTEGER,
                PRIMARY KEY (tenant, space));
            CREATE TABLE IF NOT EXISTS waits (queue TEXT, seconds REAL);
            """
        )

    def _one(self, sql: str, *args: Any) -> Any:
        with self._lock:
            row = self._db.execute(sql, args).fetchone()
        return row[0] if row else None

    def _run(self, sql: str, *args: Any) -> None:
        with self._lock:
            self._db.execute(sql, args)

    def put_job(self, job: Job, payload: str) -> None:
        self._run(
            "INSERT OR REPLACE INTO jobs VALUES (?, ?, ?, ?, 1)",
            job.tenant,
            job.job_id,
            job.model_dump_json(),
            payload,
        )

    def get_job(self, tenant: str, job_id: str) -> Job | None:
        raw = self._one("SELECT body FROM jobs WHERE tenant=? AND job_id=?", tenant, job_id)
        return Job.model_validate_json(raw) if raw else None

    def job_payload(self, tenant: str, job_id: str) -> str | None:
        raw = self._one("SELECT payload FROM jobs WHERE tenant=? AND job_id=?", tenant, job_id)
        return str(raw) if raw else None

    def update_job(self, tenant: str, job_id: str, **fields: Any) -> Job | None:
        with self._lock:
            row = self._db.execute(
                "SELECT body FROM jobs WHERE tenant=? AND job_id=?", (tenant, job_id)
            ).fetchone()
            if row is None:
                return None
            job = _updated(Job.model_validate_json(row[0]), fields)
            self._db.execute(
                "UPDATE jobs SET body=?, open=? WHERE tenant=? AND job_id=?",
                (job.model_dump_json(), int(job.state not in FINISHED), tenant, job_id),
            )
        return job

    def open_jobs(self) -> list[Job]:
        with self._lock:
            rows = self._db.execute("SELECT body FROM jobs WHERE open=1").fetchall()
        return [Job.model_validate_json(r[0]) for r in rows]

    def register(self, tenant: str, space: str, session_id: str, seq: int) -> None:
        self._run(
            "INSERT OR REPLACE INTO pending VALUES (?, ?, ?, ?)", tenant, space, session_id, seq
        )

    def unregister(self, tenant: str, space: str, session_id: str) -> None:
        self._run(
            "DELETE FROM pending WHERE tenant=? AND space=? AND session_id=?",
            tenant,
            space,
            session_id,
        )

    def head(self, tenant: str, space: str) -> str | None:
        raw = self._one(
            "SELECT session_id FROM pending WHERE tenant=? AND space=? "
            "ORDER BY seq, session_id LIMIT 1",
            tenant,
            space,
        )
        return str(raw) if raw is not None else None

    def pending(self, tenant: str, space: str) -> list[str]:
        with self._lock:
            rows = self._db.execute(
                "SELECT session_id FROM pending WHERE tenant=? AND space=? ORDER BY seq",
                (tenant, space),
            ).fetchall()
        return [str(r[0]) for r in rows]

    def delete_job(self, tenant: str, job_id: str) -> None:
        self._run("DELETE FROM jobs WHERE tenant=? AND job_id=?", tenant, job_id)

    def forget_space(self, tenant: str, space: str) -> None:
        with self._lock:
            for table in ("pending", "versions"):
                self._db.execute(f"DELETE FROM {table} WHERE tenant=? AND space=?", (tenant, space))

    def put_chunk(
        self, tenant: str, space: str, session_id: str, chunk: int, of: int, data: str
    ) -> int:
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO parked_chunks VALUES (?, ?, ?, ?, ?, ?)",
                (tenant, space, session_id, chunk, of, data),
            )
            row = self._db.execute(
                "SELECT COUNT(*) FROM parked_chunks WHERE tenant=? AND space=? AND session_id=?",
                (tenant, space, session_id),
            ).fetchone()
        return int(row[0])

    def _chunk_rows(self, columns: str, tenant: str, space: str, session_id: str) -> list[Any]:
        with self._lock:
            return self._db.execute(
                f"SELECT {columns} FROM parked_chunks WHERE tenant=? AND space=? AND session_id=?",
                (tenant, space, session_id),
            ).fetchall()

    def parked(self, tenant: str, space: str, session_id: str) -> dict[int, int]:
        rows = self._chunk_rows("chunk, of", tenant, space, session_id)
        return {int(c): int(o) for c, o in rows}

    def get_chunks(self, tenant: str, space: str, session_id: str) -> dict[int, str]:
        rows = self._chunk_rows("chunk, data", tenant, space, session_id)
        return {int(c): str(d) for c, d in rows}

    def drop_chunks(self, tenant: str, space: str, session_id: str) -> None:
        self._run(
            "DELETE FROM parked_chunks WHERE tenant=? AND space=? AND session_id=?",
            tenant,
            space,
            session_id,
        )

    def acquire(self, tenant: str, space: str, token: str, ttl_ms: int) -> bool:
        now = time.time()
        with self._lock:
            row = self._db.execute(
                "SELECT expires FROM locks WHERE tenant=? AND space=?", (tenant, space)
            ).fetchone()
            if row is not None and row[0] > now:
                return False
            self._db.execute(
                "INSERT OR REPLACE INTO locks VALUES (?, ?, ?, ?)",
                (tenant, space, token, now + ttl_ms / 1000),
            )
        return True

    def release(self, tenant: str, space: str, token: str) -> None:
        self._run("DELETE FROM locks WHERE tenant=? AND space=? AND token=?", tenant, space, token)

    def clear_locks(self) -> None:
        """Forget locks of an earlier process: the embedded store has one process at a time."""
        self._run("DELETE FROM locks")

    def bump_version(self, tenant: str, space: str) -> int:
        with self._lock:
            self._db.execute(
                "INSERT INTO versions VALUES (?, ?, 1) "
                "ON CONFLICT(tenant, space) DO UPDATE SET v = v + 1",
                (tenant, space),
            )
            row = self._db.execute(
                "SELECT v FROM versions WHERE tenant=? AND space=?", (tenant, space)
            ).fetchone()
        return int(row[0])

    def version(self, tenant: str, space: str) -> int:
        return int(
            self._one("SELECT v FROM versions WHERE tenant=? AND space=?", tenant, space) or 0
        )

    def record_wait(self, queue: str, seconds: float) -> None:
        self._run("INSERT INTO waits VALUES (?, ?)", queue, seconds)

    def waits(self, queue: str) -> list[float]:
        with self._lock:
            rows = self._db.execute("SELECT seconds FROM waits WHERE queue=?", (queue,)).fetchall()
        return [float(r[0]) for r in rows]

    def close(self) -> None:
        with self._lock:
            self._db.close()
