"""Job state: one job per accepted session, with the payload that can send it again."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Protocol, cast

import redis

from common.models.jobs import FINISHED, Job, JobState
from common.observability import metrics
from common.store import keys
from common.store.coordination.journal import Journal


class JobStore(Protocol):
    def put_job(self, job: Job, payload: str) -> None: ...
    def claim_job(self, job: Job, payload: str) -> tuple[Job, str] | None:
        """Store the job and its payload unless the job exists with its payload: None when
        stored, else the existing job and its payload, untouched. Atomic, so of two
        concurrent claims of one job exactly one stores. A job whose payload is gone (erased
        while being ingested, or expired) is claimed afresh."""
        ...

    def get_job(self, tenant: str, job_id: str) -> Job | None: ...
    def finished_jobs(self, tenant: str, job_ids: Sequence[str]) -> dict[str, Job]:
        """The jobs of `job_ids` that are done or failed, read in as few round trips as the
        backend allows (a wait on thousands of jobs reads them every round)."""
        ...

    def job_payload(self, tenant: str, job_id: str) -> str | None: ...
    def update_job(
        self, tenant: str, job_id: str, reopen: bool = False, **fields: Any
    ) -> Job | None:
        """Change the job's fields; None if there is no such job. A failed job is left as it
        is, and a done one is not moved back to work, unless `reopen` (a retry): a task still
        running for a job that failed or was erased meanwhile cannot bring it back. Atomic
        with every other write of the job."""
        ...

    def open_jobs(self) -> list[Job]:
        """Every job not yet done or failed (what a resume sends again)."""
        ...

    def delete_job(self, tenant: str, job_id: str) -> None: ...
    def cancel_job(self, tenant: str, job_id: str, reason: str) -> None:
        """Fail the job with `reason` and drop its payload (the raw session) in one write:
        nothing can send it again, and a task still holding it sees it gone."""
        ...

    def recent_jobs(
        self,
        tenant: str,
        space: str | None,
        limit: int,
        state: JobState | None = None,
        offset: int = 0,
    ) -> list[Job]:
        """The tenant's newest jobs (of one space, in one state, when given), newest first,
        after skipping the `offset` newest of them."""
        ...

    def touch(self, tenant: str, job_ids: list[str]) -> None:
        """Mark open jobs as making progress now (a task working on them is alive)."""
        ...

    def stalled(self, before: float) -> list[tuple[Job, float]]:
        """Open jobs with no progress since `before`, each with when it last progressed."""
        ...

    def note_resent(self, tenant: str, job_id: str, stale_s: float) -> None:
        """The sweep sent the job again: it counts as progressing now, and each resend with
        no real progress in between doubles the wait before the next (up to 64 times
        `stale_s`), so a job that only waits its turn behind a long backlog is not sent
        again and again."""
        ...


def _updated(job: Job, fields: dict[str, Any]) -> Job:
    return job.model_copy(update={**fields, "updated_at": time.time()})


def _frozen(job: Job, fields: dict[str, Any], reopen: bool) -> bool:
    """Whether this update must leave the job as it is (see `JobStore.update_job`)."""
    if reopen:
        return False
    return job.state == "failed" or (
        job.state == "done" and fields.get("state", "done") not in FINISHED
    )


def _member(tenant: str, job_id: str) -> str:
    return f"{tenant}\x1f{job_id}"


MGET_BATCH = 500  # job records per MGET: one round trip each, none of them huge

_CLAIM = """
local job = redis.call('get', KEYS[1])
local payload = redis.call('get', KEYS[2])
if job and payload then return {job, payload} end
redis.call('set', KEYS[1], ARGV[1], 'EX', ARGV[3])
redis.call('set', KEYS[2], ARGV[2], 'EX', ARGV[3])
redis.call('sadd', KEYS[3], ARGV[4])
redis.call('zadd', KEYS[4], ARGV[5], ARGV[4])
redis.call('zadd', KEYS[5], ARGV[8], ARGV[6])
redis.call('zremrangebyrank', KEYS[5], 0, -1 - ARGV[7])
return false
"""


_RESENT = """
local n = redis.call('hincrby', KEYS[2], ARGV[1], 1)
if n > 7 then n = 7 end
redis.call('zadd', KEYS[1], 'XX', ARGV[2] + (2 ^ (n - 1) - 1) * ARGV[3], ARGV[1])
return n
"""


class RedisJobs:
    """Jobs as JSON strings that expire, with a set of the open ones and when each last made
    progress (a sorted set the sweep reads)."""

    def __init__(self, client: redis.Redis, job_ttl_s: int) -> None:
        self._r = client
        self._ttl = job_ttl_s
        self._claim = client.register_script(_CLAIM)
        self._resent = client.register_script(_RESENT)

    def put_job(self, job: Job, payload: str) -> None:
        member = _member(job.tenant, job.job_id)
        pipe = self._r.pipeline()
        pipe.set(keys.job(job.tenant, job.job_id), job.model_dump_json(), ex=self._ttl)
        pipe.set(keys.job_payload(job.tenant, job.job_id), payload, ex=self._ttl)
        pipe.sadd(keys.OPEN_JOBS, member)
        pipe.zadd(keys.JOB_PROGRESS, {member: job.updated_at})
        pipe.zadd(keys.recent_jobs(job.tenant), {job.job_id: job.created_at})
        pipe.zremrangebyrank(keys.recent_jobs(job.tenant), 0, -1 - keys.RECENT_JOBS)
        pipe.execute()

    def claim_job(self, job: Job, payload: str) -> tuple[Job, str] | None:
        found = self._claim(
            keys=[
                keys.job(job.tenant, job.job_id),
                keys.job_payload(job.tenant, job.job_id),
                keys.OPEN_JOBS,
                keys.JOB_PROGRESS,
                keys.recent_jobs(job.tenant),
            ],
            args=[
                job.model_dump_json(),
                payload,
                self._ttl,
                _member(job.tenant, job.job_id),
                job.updated_at,
                job.job_id,
                keys.RECENT_JOBS,
                job.created_at,
            ],
        )
        if not found:
            return None
        return Job.model_validate_json(found[0]), str(found[1])

    def get_job(self, tenant: str, job_id: str) -> Job | None:
        raw = self._r.get(keys.job(tenant, job_id))
        return Job.model_validate_json(raw) if raw else None

    def finished_jobs(self, tenant: str, job_ids: Sequence[str]) -> dict[str, Job]:
        out: dict[str, Job] = {}
        for at in range(0, len(job_ids), MGET_BATCH):
            ids = job_ids[at : at + MGET_BATCH]
            for job_id, raw in zip(
                ids, self._r.mget([keys.job(tenant, j) for j in ids]), strict=True
            ):
                if raw:
                    job = Job.model_validate_json(raw)
                    if job.state in FINISHED:
                        out[job_id] = job
        return out

    def job_payload(self, tenant: str, job_id: str) -> str | None:
        raw = self._r.get(keys.job_payload(tenant, job_id))
        return str(raw) if raw else None

    def update_job(
        self, tenant: str, job_id: str, reopen: bool = False, **fields: Any
    ) -> Job | None:
        key = keys.job(tenant, job_id)
        member = _member(tenant, job_id)
        with self._r.pipeline() as pipe:
            while True:  # optimistic: a write of the job in between (a cancel) starts it over
                try:
                    pipe.watch(key)  # type: ignore[no-untyped-call]
                    raw = pipe.get(key)
                    if raw is None:
                        return None
                    job = Job.model_validate_json(raw)
                    if _frozen(job, fields, reopen):
                        return job
                    moved = job.state != fields.get("state", job.state)
                    was_open = job.state not in FINISHED
                    job = _updated(job, fields)
                    pipe.multi()
                    pipe.set(key, job.model_dump_json(), ex=self._ttl)
                    # A new state is real progress: the sweep's backoff starts over. A resent
                    # job entering the state it was already in is not.
                    if moved:
                        pipe.hdel(keys.JOB_RESENDS, member)
                    if job.state in FINISHED:
                        pipe.srem(keys.OPEN_JOBS, member)
                        pipe.zrem(keys.JOB_PROGRESS, member)
                    else:
                        pipe.sadd(keys.OPEN_JOBS, member)
                        pipe.zadd(keys.JOB_PROGRESS, {member: job.updated_at})
                    pipe.execute()
                    if was_open and job.state in FINISHED:
                        metrics.job_ended(job.state, job.created_at)
                    return job
                except redis.WatchError:
                    continue

    def touch(self, tenant: str, job_ids: list[str]) -> None:
        if job_ids:
            now = time.time()
            self._r.zadd(keys.JOB_PROGRESS, {_member(tenant, j): now for j in job_ids}, xx=True)

    def stalled(self, before: float) -> list[tuple[Job, float]]:
        out = []
        found = self._r.zrangebyscore(keys.JOB_PROGRESS, "-inf", before, withscores=True)
        for member, score in cast(list[tuple[str, float]], found):
            tenant, job_id = str(member).split("\x1f", 1)
            job = self.get_job(tenant, job_id)
            if job is None or job.state in FINISHED:  # expired, or finished meanwhile
                self._r.zrem(keys.JOB_PROGRESS, member)
                continue
            out.append((job, float(score)))
        return out

    def note_resent(self, tenant: str, job_id: str, stale_s: float) -> None:
        self._resent(
            keys=[keys.JOB_PROGRESS, keys.JOB_RESENDS],
            args=[_member(tenant, job_id), time.time(), stale_s],
        )

    def open_jobs(self) -> list[Job]:
        out = []
        for member in self._r.smembers(keys.OPEN_JOBS):
            tenant, job_id = str(member).split("\x1f", 1)
            job = self.get_job(tenant, job_id)
            if job is not None:
                out.append(job)
        return out

    def delete_job(self, tenant: str, job_id: str) -> None:
        pipe = self._r.pipeline()
        pipe.delete(keys.job(tenant, job_id), keys.job_payload(tenant, job_id))
        pipe.srem(keys.OPEN_JOBS, _member(tenant, job_id))
        pipe.zrem(keys.JOB_PROGRESS, _member(tenant, job_id))
        pipe.hdel(keys.JOB_RESENDS, _member(tenant, job_id))
        pipe.zrem(keys.recent_jobs(tenant), job_id)
        pipe.execute()

    def cancel_job(self, tenant: str, job_id: str, reason: str) -> None:
        key = keys.job(tenant, job_id)
        member = _member(tenant, job_id)
        with self._r.pipeline() as pipe:
            while True:  # the failed job and the payload's removal in one transaction
                try:
                    pipe.watch(key)  # type: ignore[no-untyped-call]
                    raw = pipe.get(key)
                    pipe.multi()
                    job = Job.model_validate_json(raw) if raw is not None else None
                    if job is not None:
                        failed = _updated(job, {"state": "failed", "reason": reason})
                        pipe.set(key, failed.model_dump_json(), ex=self._ttl)
                    pipe.delete(keys.job_payload(tenant, job_id))
                    pipe.srem(keys.OPEN_JOBS, member)
                    pipe.zrem(keys.JOB_PROGRESS, member)
                    pipe.hdel(keys.JOB_RESENDS, member)
                    pipe.execute()
                    if job is not None and job.state not in FINISHED:
                        metrics.job_ended("cancelled", job.created_at)
                    return
                except redis.WatchError:
                    continue

    def recent_jobs(
        self,
        tenant: str,
        space: str | None,
        limit: int,
        state: JobState | None = None,
        offset: int = 0,
    ) -> list[Job]:
        out: list[Job] = []
        seen: set[str] = set()  # a job created while paging shifts the ranks by one
        at, batch = 0, max(limit + offset, 100)
        while len(out) < limit + offset:
            ids = [str(j) for j in self._r.zrevrange(keys.recent_jobs(tenant), at, at + batch - 1)]
            if not ids:
                break
            at += len(ids)
            raws = self._r.mget([keys.job(tenant, j) for j in ids])
            expired = [j for j, raw in zip(ids, raws, strict=True) if raw is None]
            if expired:  # the job's record expired (pipeline.job_ttl_s): drop it here too
                self._r.zrem(keys.recent_jobs(tenant), *expired)
                at -= len(expired)
            for raw in raws:
                job = Job.model_validate_json(raw) if raw else None
                if job is None or job.job_id in seen or not _chosen(job, space, state):
                    continue
                seen.add(job.job_id)
                out.append(job)
        return out[offset : offset + limit]


def _chosen(job: Job, space: str | None, state: JobState | None) -> bool:
    return space in (None, job.space) and state in (None, job.state)


_IN_BATCH = 500  # ids per SQLite `IN (...)`, well under its limit on bound parameters


class SqliteJobs:
    """Jobs journaled with their payloads, so an interrupted embedded run finds them again."""

    def __init__(self, journal: Journal) -> None:
        self._j = journal
        journal.create(
            "CREATE TABLE IF NOT EXISTS jobs (tenant TEXT, job_id TEXT, body TEXT, payload TEXT,"
            " open INTEGER, PRIMARY KEY (tenant, job_id))"
        )

    def put_job(self, job: Job, payload: str) -> None:
        self._j.run(
            "INSERT OR REPLACE INTO jobs VALUES (?, ?, ?, ?, 1)",
            job.tenant,
            job.job_id,
            job.model_dump_json(),
            payload,
        )

    def claim_job(self, job: Job, payload: str) -> tuple[Job, str] | None:
        with self._j.locked() as db:
            stored = db.execute(
                "INSERT INTO jobs VALUES (?, ?, ?, ?, 1) ON CONFLICT (tenant, job_id) DO UPDATE"
                " SET body=excluded.body, payload=excluded.payload, open=1"
                " WHERE jobs.payload IS NULL OR jobs.payload = ''",
                (job.tenant, job.job_id, job.model_dump_json(), payload),
            ).rowcount
            if stored == 1:
                return None
            row = db.execute(
                "SELECT body, payload FROM jobs WHERE tenant=? AND job_id=?",
                (job.tenant, job.job_id),
            ).fetchone()
        return Job.model_validate_json(row[0]), str(row[1])

    def get_job(self, tenant: str, job_id: str) -> Job | None:
        raw = self._j.one("SELECT body FROM jobs WHERE tenant=? AND job_id=?", tenant, job_id)
        return Job.model_validate_json(raw) if raw else None

    def finished_jobs(self, tenant: str, job_ids: Sequence[str]) -> dict[str, Job]:
        # only the finished rows are read and parsed: the open ones cost an index probe
        out: dict[str, Job] = {}
        for at in range(0, len(job_ids), _IN_BATCH):
            ids = list(job_ids[at : at + _IN_BATCH])
            marks = ", ".join("?" * len(ids))
            for job_id, body in self._j.rows(
                f"SELECT job_id, body FROM jobs WHERE tenant=? AND open=0 AND job_id IN ({marks})",
                tenant,
                *ids,
            ):
                out[str(job_id)] = Job.model_validate_json(body)
        return out

    def job_payload(self, tenant: str, job_id: str) -> str | None:
        raw = self._j.one("SELECT payload FROM jobs WHERE tenant=? AND job_id=?", tenant, job_id)
        return str(raw) if raw else None

    def update_job(
        self, tenant: str, job_id: str, reopen: bool = False, **fields: Any
    ) -> Job | None:
        with self._j.locked() as db:
            row = db.execute(
                "SELECT body FROM jobs WHERE tenant=? AND job_id=?", (tenant, job_id)
            ).fetchone()
            if row is None:
                return None
            job = Job.model_validate_json(row[0])
            if _frozen(job, fields, reopen):
                return job
            was_open = job.state not in FINISHED
            job = _updated(job, fields)
            db.execute(
                "UPDATE jobs SET body=?, open=? WHERE tenant=? AND job_id=?",
                (job.model_dump_json(), int(job.state not in FINISHED), tenant, job_id),
            )
        if was_open and job.state in FINISHED:
            metrics.job_ended(job.state, job.created_at)
        return job

    def open_jobs(self) -> list[Job]:
        rows = self._j.rows("SELECT body FROM jobs WHERE open=1")
        return [Job.model_validate_json(r[0]) for r in rows]

    def delete_job(self, tenant: str, job_id: str) -> None:
        self._j.run("DELETE FROM jobs WHERE tenant=? AND job_id=?", tenant, job_id)

    def cancel_job(self, tenant: str, job_id: str, reason: str) -> None:
        with self._j.locked() as db:
            row = db.execute(
                "SELECT body FROM jobs WHERE tenant=? AND job_id=?", (tenant, job_id)
            ).fetchone()
            if row is None:
                return
            job = Job.model_validate_json(row[0])
            failed = _updated(job, {"state": "failed", "reason": reason})
            db.execute(
                "UPDATE jobs SET body=?, payload=NULL, open=0 WHERE tenant=? AND job_id=?",
                (failed.model_dump_json(), tenant, job_id),
            )
        if job.state not in FINISHED:
            metrics.job_ended("cancelled", job.created_at)

    def recent_jobs(
        self,
        tenant: str,
        space: str | None,
        limit: int,
        state: JobState | None = None,
        offset: int = 0,
    ) -> list[Job]:
        jobs = [
            Job.model_validate_json(r[0])
            for r in self._j.rows("SELECT body FROM jobs WHERE tenant=?", tenant)
        ]
        jobs = [j for j in jobs if _chosen(j, space, state)]
        return sorted(jobs, key=lambda j: (-j.created_at, j.job_id))[offset : offset + limit]

    def touch(self, tenant: str, job_ids: list[str]) -> None:
        for job_id in job_ids:
            job = self.get_job(tenant, job_id)
            if job is not None and job.state not in FINISHED:
                self.update_job(tenant, job_id)

    def stalled(self, before: float) -> list[tuple[Job, float]]:
        return [(j, j.updated_at) for j in self.open_jobs() if j.updated_at < before]

    def note_resent(self, tenant: str, job_id: str, stale_s: float) -> None:
        self.touch(tenant, [job_id])  # one process, no sweep: nothing to back off from
