"""Job state: one job per accepted session, with the payload that can send it again."""

from __future__ import annotations

import time
from typing import Any, Protocol

import redis

from common.models.jobs import FINISHED, Job
from common.store import keys
from common.store.coordination.journal import Journal


class JobStore(Protocol):
    def put_job(self, job: Job, payload: str) -> None: ...
    def get_job(self, tenant: str, job_id: str) -> Job | None: ...
    def job_payload(self, tenant: str, job_id: str) -> str | None: ...
    def update_job(self, tenant: str, job_id: str, **fields: Any) -> Job | None: ...
    def open_jobs(self) -> list[Job]:
        """Every job not yet done or failed (what a resume sends again)."""
        ...

    def delete_job(self, tenant: str, job_id: str) -> None: ...


def _updated(job: Job, fields: dict[str, Any]) -> Job:
    return job.model_copy(update={**fields, "updated_at": time.time()})


def _member(tenant: str, job_id: str) -> str:
    return f"{tenant}\x1f{job_id}"


class RedisJobs:
    """Jobs as JSON strings that expire, with a set of the open ones."""

    def __init__(self, client: redis.Redis, job_ttl_s: int) -> None:
        self._r = client
        self._ttl = job_ttl_s

    def put_job(self, job: Job, payload: str) -> None:
        pipe = self._r.pipeline()
        pipe.set(keys.job(job.tenant, job.job_id), job.model_dump_json(), ex=self._ttl)
        pipe.set(keys.job_payload(job.tenant, job.job_id), payload, ex=self._ttl)
        pipe.sadd(keys.OPEN_JOBS, _member(job.tenant, job.job_id))
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
            pipe.srem(keys.OPEN_JOBS, _member(tenant, job_id))
        else:
            pipe.sadd(keys.OPEN_JOBS, _member(tenant, job_id))
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

    def delete_job(self, tenant: str, job_id: str) -> None:
        pipe = self._r.pipeline()
        pipe.delete(keys.job(tenant, job_id), keys.job_payload(tenant, job_id))
        pipe.srem(keys.OPEN_JOBS, _member(tenant, job_id))
        pipe.execute()


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

    def get_job(self, tenant: str, job_id: str) -> Job | None:
        raw = self._j.one("SELECT body FROM jobs WHERE tenant=? AND job_id=?", tenant, job_id)
        return Job.model_validate_json(raw) if raw else None

    def job_payload(self, tenant: str, job_id: str) -> str | None:
        raw = self._j.one("SELECT payload FROM jobs WHERE tenant=? AND job_id=?", tenant, job_id)
        return str(raw) if raw else None

    def update_job(self, tenant: str, job_id: str, **fields: Any) -> Job | None:
        with self._j.locked() as db:
            row = db.execute(
                "SELECT body FROM jobs WHERE tenant=? AND job_id=?", (tenant, job_id)
            ).fetchone()
            if row is None:
                return None
            job = _updated(Job.model_validate_json(row[0]), fields)
            db.execute(
                "UPDATE jobs SET body=?, open=? WHERE tenant=? AND job_id=?",
                (job.model_dump_json(), int(job.state not in FINISHED), tenant, job_id),
            )
        return job

    def open_jobs(self) -> list[Job]:
        rows = self._j.rows("SELECT body FROM jobs WHERE open=1")
        return [Job.model_validate_json(r[0]) for r in rows]

    def delete_job(self, tenant: str, job_id: str) -> None:
        self._j.run("DELETE FROM jobs WHERE tenant=? AND job_id=?", tenant, job_id)
