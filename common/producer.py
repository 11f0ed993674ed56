"""The producer side: submit sessions, read and retry jobs, query; sends tasks by name only."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from celery import Celery

from common.errors import AtomMemError, Conflict, InvalidInput, NotFound, SessionConflict
from common.models import ids
from common.models.jobs import (
    FINISHED,
    AcceptPayload,
    AdminOp,
    AdminPayload,
    Job,
    ProfilePayload,
    QueryPayload,
    ReadPayload,
    ReadWhat,
    TaskPayload,
)
from common.models.session import SessionInput
from common.queues import TaskName
from common.store.coordination import JobStore, SpaceSequence


class JobNotFound(NotFound):
    pass


_KINDS: dict[str, type[AtomMemError]] = {
    "not_found": NotFound,
    "conflict": Conflict,
    "invalid": InvalidInput,
}


def _content(raw: str) -> str:
    """The content hash of a stored accept payload's session (its order aside)."""
    try:
        return AcceptPayload.model_validate_json(raw).session.content_hash()
    except ValueError:  # unreadable: never taken for the same content
        return ""


def _raise_for(result: dict[str, Any]) -> None:
    """A worker's {"error", "kind"} reply as the matching exception."""
    if "error" in result:
        raise _KINDS.get(str(result.get("kind")), AtomMemError)(str(result["error"]))


class MemoryClient:
    """What a chat backend (or the CLI) uses to feed and query memory."""

    def __init__(self, app: Celery, jobs: JobStore, sequence: SpaceSequence) -> None:
        self._app = app
        self._jobs = jobs
        self._sequence = sequence

    def _send(self, name: TaskName, body: Any, **options: Any) -> Any:
        payload = body.model_copy(update={"enqueued_at": time.time()}).model_dump(mode="json")
        return self._app.send_task(name.value, kwargs={"payload": payload}, **options)

    def submit(self, tenant: str, space: str, sessions: Sequence[SessionInput]) -> list[Job]:
        """Accept sessions of one space (see `submit_many`)."""
        return self.submit_many(tenant, [(space, s) for s in sessions])

    def submit_many(self, tenant: str, items: Sequence[tuple[str, SessionInput]]) -> list[Job]:
        """Accept sessions: every one gets a job and its place in its space's sequence
        before any is sent, so a backlog commits in session order however it is consumed.
        (A session submitted after a later one of its space committed is committed then.)

        A session id submitted before is the same job: with the same content it is returned
        as it stands (a failed one is sent again), with other content the whole call is
        refused with `SessionConflict` and changes nothing. The job is claimed atomically,
        so of two concurrent submissions of one session with different content exactly one
        is accepted."""
        now = time.time()
        fresh: list[AcceptPayload] = []
        again: list[Job] = []
        jobs: list[Job] = []
        try:
            for space, session in items:
                job = Job(
                    job_id=ids.job_id(tenant, space, session.session_id),
                    tenant=tenant,
                    space=space,
                    session_id=session.session_id,
                    created_at=now,
                    updated_at=now,
                )
                payload = AcceptPayload(
                    enqueued_at=0.0, job_id=job.job_id, tenant=tenant, space=space, session=session
                )
                existing = self._jobs.claim_job(job, payload.model_dump_json())
                if existing is None:
                    self._sequence.register(tenant, space, session.session_id, session.order)
                    fresh.append(payload)
                    jobs.append(job)
                    continue
                old, raw = existing
                if _content(raw) != session.content_hash():
                    raise SessionConflict(
                        f"session {session.session_id!r} of space {space!r} was already "
                        f"submitted with different content as job {old.job_id} (state "
                        f"{old.state}); erase it first or use a new session_id"
                    )
                if old.state == "failed":
                    again.append(old)
                jobs.append(old)
        except SessionConflict:
            for p in fresh:  # nothing was sent yet: undo this call's claims
                self._sequence.unregister(tenant, p.space, p.session.session_id)
                self._jobs.delete_job(tenant, p.job_id)
            raise
        for payload in fresh:
            self._send(TaskName.ACCEPT, payload)
        retried = {j.job_id: self.retry(tenant, j.job_id) for j in again}
        return [self._as_resubmitted(retried.get(j.job_id, j)) for j in jobs]

    def _as_resubmitted(self, job: Job) -> Job:
        """A done job submitted again is marked as finding its session already in memory;
        its state and counts stay as they are."""
        if job.state != "done" or job.unchanged:
            return job
        return self._jobs.update_job(job.tenant, job.job_id, unchanged=True) or job

    def job(self, tenant: str, job_id: str) -> Job:
        job = self._jobs.get_job(tenant, job_id)
        if job is None:
            raise JobNotFound(f"no job {job_id!r} for tenant {tenant!r}")
        return job

    def recent_jobs(self, tenant: str, space: str | None = None, limit: int = 50) -> list[Job]:
        """The tenant's newest jobs (of one space, when given), newest first."""
        return self._jobs.recent_jobs(tenant, space, limit)

    def retry(self, tenant: str, job_id: str) -> Job:
        """Send a failed (or stuck) job again; ids are deterministic, so nothing doubles.
        A done job is left as it is."""
        raw = self._jobs.job_payload(tenant, job_id)
        if raw is None:
            gone = self.job(tenant, job_id)  # JobNotFound when there is no job at all
            raise Conflict(
                f"job {job_id!r} holds no session to send again ({gone.reason or 'expired'}); "
                "submit the session again"
            )
        job = self.job(tenant, job_id)
        if job.state == "done":
            return job
        if job.state == "failed":
            updated = self._jobs.update_job(
                tenant, job_id, reopen=True, state="queued", reason=None, attempts=job.attempts + 1
            )
            job = updated or job
        self.resend([job])
        return job

    def resend(self, jobs: Sequence[Job], backoff_s: float | None = None) -> list[Job]:
        """Send these jobs' accepts again from their stored payloads (accept is idempotent:
        it re-sends only the chunks not yet extracted, or finds the session further on).
        `backoff_s`: the sweep's staleness, doubled per resend without progress."""
        sent = []
        for job in jobs:
            raw = self._jobs.job_payload(job.tenant, job.job_id)
            if raw is None:
                continue
            payload = AcceptPayload.model_validate_json(raw)
            if backoff_s is None:
                self._jobs.touch(job.tenant, [job.job_id])
            else:
                self._jobs.note_resent(job.tenant, job.job_id, backoff_s)
            self._sequence.register(job.tenant, job.space, job.session_id, payload.session.order)
            self._send(TaskName.ACCEPT, payload)
            sent.append(job)
        return sent

    def resend_open(self) -> list[Job]:
        """Send every unfinished job again (the embedded journal after an interruption)."""
        return self.resend(self._jobs.open_jobs())

    def wait(
        self,
        tenant: str,
        job_ids: Sequence[str],
        timeout: float | None = None,
        on_progress: Callable[[int], None] | None = None,
        poll: float = 0.05,
    ) -> list[Job]:
        """Block until every job is done or failed; report how many finished so far."""
        deadline = None if timeout is None else time.monotonic() + timeout
        pending = set(job_ids)
        finished: dict[str, Job] = {}
        while pending:
            for job_id in list(pending):
                job = self._jobs.get_job(tenant, job_id)
                if job is not None and job.state in FINISHED:
                    finished[job_id] = job
                    pending.discard(job_id)
            if on_progress:
                on_progress(len(finished))
            if not pending:
                break
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"{len(pending)} jobs still running after {timeout}s")
            time.sleep(poll)
        return [finished[j] for j in job_ids]

    def flush_profiles(self, tenant: str, space: str, timeout: float = 300.0) -> None:
        """Run the profile batch now over the space's pending candidates, and wait for it."""
        body = ProfilePayload(enqueued_at=0.0, tenant=tenant, space=space)
        self._send(TaskName.PROFILE, body, ignore_result=False).get(timeout=timeout, interval=0.01)

    def _query(
        self,
        name: TaskName,
        tenant: str,
        space: str,
        question: str,
        k: int | None,
        timeout: float,
        mode: str | None = None,
        explain: bool = False,
    ) -> dict[str, Any]:
        # `mode` arrives as any string (CLI, bench): validation refuses one that is no recall mode
        body = QueryPayload.model_validate(
            dict(
                enqueued_at=0.0,
                tenant=tenant,
                space=space,
                question=question,
                k=k,
                mode=mode,
                explain=explain,
            )
        )
        return self._call(name, body, timeout)

    def search(
        self,
        tenant: str,
        space: str,
        question: str,
        k: int | None = None,
        timeout: float = 60.0,
        mode: str | None = None,
        explain: bool = False,
    ) -> dict[str, Any]:
        """Ranked facts; `mode` overrides the configured recall mode for this query;
        `explain` adds the recall graph."""
        return self._query(TaskName.SEARCH, tenant, space, question, k, timeout, mode, explain)

    def ask(
        self,
        tenant: str,
        space: str,
        question: str,
        timeout: float = 60.0,
        k: int | None = None,
        mode: str | None = None,
        explain: bool = False,
    ) -> dict[str, Any]:
        return self._query(TaskName.ASK, tenant, space, question, k, timeout, mode, explain)

    def _call(self, name: TaskName, body: TaskPayload, timeout: float) -> dict[str, Any]:
        """Send a task and wait for its reply, then delete the reply from the result
        backend: replies carry memory, and erased memory must not linger there."""
        if name is not TaskName.ADMIN:  # an erasure still runs after its caller gave up
            body = body.model_copy(update={"reply_by": time.time() + timeout})
        pending = self._send(name, body)
        try:
            result = pending.get(timeout=timeout, interval=0.005)
        finally:
            pending.forget()
        _raise_for(result)
        return dict(result)

    def read(
        self,
        tenant: str,
        what: ReadWhat,
        space: str | None = None,
        item_id: str | None = None,
        limit: int = 100,
        offset: int = 0,
        timeout: float = 60.0,
    ) -> dict[str, Any]:
        """Stored memory through the query queue: spaces, or a space's facts, events or
        profiles (a page, or one by id with its history and provenance)."""
        body = ReadPayload(
            enqueued_at=0.0,
            tenant=tenant,
            what=what,
            space=space,
            item_id=item_id,
            limit=limit,
            offset=offset,
        )
        return self._call(TaskName.READ, body, timeout)

    def admin(
        self,
        tenant: str,
        space: str,
        op: AdminOp,
        item_id: str | None = None,
        timeout: float = 300.0,
    ) -> dict[str, Any]:
        """Create a space, or erase a fact, a session's contribution or a whole space;
        returns the space, or what was erased."""
        body = AdminPayload(enqueued_at=0.0, tenant=tenant, space=space, op=op, item_id=item_id)
        return self._call(TaskName.ADMIN, body, timeout)

    def ping(self, timeout: float = 5.0) -> dict[str, Any]:
        """Whether a query worker answers and reaches the store."""
        return self._call(TaskName.PING, TaskPayload(enqueued_at=0.0), timeout)
