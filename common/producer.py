"""The producer side: submit sessions, read and retry jobs, query; sends tasks by name only."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, TypeVar

from celery import Celery
from pydantic import BaseModel

from common.celery_config import send_payload
from common.errors import Conflict, NotFound, SessionConflict, raise_failure
from common.models import ids
from common.models.api import FactCorrection, ListingFilter, SearchFilters
from common.models.jobs import (
    AcceptPayload,
    AdminOp,
    AdminPayload,
    Job,
    JobState,
    ProfilePayload,
    QueryPayload,
    ReadPayload,
    ReadWhat,
    TaskPayload,
)
from common.models.memory import Event, Fact, Profile
from common.models.query import AskResponse, SearchResponse
from common.models.replies import ONE, REPLIES, Erasure
from common.models.responses import (
    RECORDS,
    CorrectionReceipt,
    ErasureReceipt,
    JobList,
    Kind,
    Page,
    Ping,
    SessionSummary,
    Space,
    SpaceList,
    StoredSession,
)
from common.models.session import SessionInput
from common.queues import TASK_PRIORITY, TaskName
from common.store.coordination.jobs import JobStore
from common.store.coordination.sequence import SpaceSequence

Reply = TypeVar("Reply", bound=BaseModel)
# How long a caller waits for a read (a query worker) and for an admin write (which may wait
# out a commit holding the space's lock) unless it says otherwise; the service's own come
# from `api.query_timeout_s` and `api.admin_timeout_s`.
READ_S = 60.0
ADMIN_S = 300.0


class JobNotFound(NotFound):
    pass


def _content(raw: str) -> str:
    """The content hash of a stored accept payload's session (its order aside)."""
    try:
        return AcceptPayload.model_validate_json(raw).session.content_hash()
    except ValueError:  # unreadable: never taken for the same content
        return ""


class Producer:
    """What a chat backend (or the CLI) uses to feed and query memory."""

    def __init__(self, app: Celery, jobs: JobStore, sequence: SpaceSequence) -> None:
        self._app = app
        self._jobs = jobs
        self._sequence = sequence

    def _send(self, name: TaskName, body: Any, **options: Any) -> Any:
        payload = body.model_copy(update={"enqueued_at": time.time()}).model_dump(mode="json")
        if name in TASK_PRIORITY:  # a question takes turns with the lanes (common.queues)
            options.setdefault("priority", TASK_PRIORITY[name])
        return send_payload(self._app, name.value, payload, **options)

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

    def recent_jobs(
        self,
        tenant: str,
        space: str | None = None,
        limit: int = 50,
        state: JobState | None = None,
        offset: int = 0,
    ) -> list[Job]:
        """The tenant's newest jobs (of one space, in one state, when given), newest first,
        after the `offset` newest."""
        return self._jobs.recent_jobs(tenant, space, limit, state, offset)

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
            # one read a round, however many jobs: a wait on a thousand jobs polled each on
            # its own took a core from the workers it waited for
            for job_id, job in self._jobs.finished_jobs(tenant, sorted(pending)).items():
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

    def flush_profiles(self, tenant: str, space: str, timeout: float = ADMIN_S) -> None:
        """Run the profile batch now over the space's pending candidates, and wait for it."""
        body = ProfilePayload(enqueued_at=0.0, tenant=tenant, space=space)
        self._send(TaskName.PROFILE, body, ignore_result=False).get(timeout=timeout, interval=0.01)

    def search(
        self,
        tenant: str,
        space: str,
        question: str,
        k: int | None = None,
        timeout: float = READ_S,
        mode: str | None = None,
        explain: bool = False,
        min_score: float | None = None,
        filters: SearchFilters | None = None,
        as_of: datetime | None = None,
        profiles: bool = False,
    ) -> SearchResponse:
        """Ranked facts; `mode` overrides the configured recall mode for this query;
        `explain` adds the recall graph; `min_score` and `filters` narrow the hits; `as_of`
        (naive wall-clock time) is when the question is asked; `profiles` looks profiles up
        whatever the question's intent says."""
        body = _question(
            tenant, space, question, k, mode, explain, min_score, filters, as_of, profiles
        )
        return self._call(TaskName.SEARCH, body, timeout, SearchResponse)

    def ask(
        self,
        tenant: str,
        space: str,
        question: str,
        timeout: float = READ_S,
        k: int | None = None,
        mode: str | None = None,
        explain: bool = False,
        min_score: float | None = None,
        filters: SearchFilters | None = None,
        as_of: datetime | None = None,
    ) -> AskResponse:
        """An answer from memory with the facts it used."""
        body = _question(tenant, space, question, k, mode, explain, min_score, filters, as_of)
        return self._call(TaskName.ASK, body, timeout, AskResponse)

    def spaces(self, tenant: str, timeout: float = READ_S) -> SpaceList:
        return self._read(tenant, "spaces", None, timeout, SpaceList)

    def space(self, tenant: str, space: str, timeout: float = READ_S) -> Space:
        """The space with its counts; `NotFound` when the tenant has no such space."""
        return self._read(tenant, "space", space, timeout, Space)

    def page(
        self,
        tenant: str,
        space: str,
        kind: Kind,
        limit: int = 100,
        offset: int = 0,
        timeout: float = READ_S,
        narrow: ListingFilter | None = None,
    ) -> Page[Any]:
        """A page of the space's facts (in session order), events (in time order) or profiles
        (by id), those `narrow` lets through, as `PAGES[kind]`; `total` counts them all."""
        return self._read(tenant, kind, space, timeout, Page, limit, offset, narrow=narrow)

    def sessions(
        self, tenant: str, space: str, limit: int = 100, offset: int = 0, timeout: float = READ_S
    ) -> Page[SessionSummary]:
        """A page of the space's stored sessions, in session order."""
        return self._read(tenant, "sessions", space, timeout, Page, limit, offset)

    def record(
        self, tenant: str, space: str, kind: Kind, item_id: str, timeout: float = READ_S
    ) -> Fact | Event | Profile:
        """One fact, event or profile by id (`kind` names its listing), with its history and
        provenance."""
        found = self._read(tenant, ONE[kind], space, timeout, BaseModel, item_id=item_id)
        assert isinstance(found, RECORDS[kind])  # the table's model for the kind
        return found

    def stored_session(
        self, tenant: str, space: str, session_id: str, timeout: float = READ_S
    ) -> StoredSession:
        """A stored session with its turns, as submitted."""
        return self._read(tenant, "session", space, timeout, StoredSession, item_id=session_id)

    def create_space(self, tenant: str, space: str, timeout: float = ADMIN_S) -> Space:
        """A new, empty space (`Conflict` when the name is taken)."""
        return self._admin(tenant, space, "create_space", None, timeout, Space)

    def erase(
        self, tenant: str, space: str, op: Erasure, item_id: str | None = None,
        timeout: float = ADMIN_S,
    ) -> ErasureReceipt:  # fmt: skip
        """Erase a fact, a session's contribution or the whole space; what was removed."""
        return self._admin(tenant, space, op, item_id, timeout, ErasureReceipt)

    def correct(
        self, tenant: str, space: str, fact_id: str, correction: FactCorrection,
        timeout: float = ADMIN_S,
    ) -> CorrectionReceipt:  # fmt: skip
        """Rewrite a fact's text, verified against the space; what changed."""
        return self._admin(
            tenant, space, "correct_fact", fact_id, timeout, CorrectionReceipt, correction
        )

    def rebuild(self, tenant: str, source: str, into: str, timeout: float = ADMIN_S) -> list[Job]:
        """Re-run the stored sessions of `source` into `into` (created when missing) as
        ordinary jobs, planned by one admin task under the target's lock."""
        return self._admin(tenant, into, "rebuild_from", source, timeout, JobList).items

    def ping(self, timeout: float = 5.0) -> Ping:
        """Whether a query worker answers and reaches the store."""
        return self._call(TaskName.PING, TaskPayload(enqueued_at=0.0), timeout, Ping)

    def _read(
        self,
        tenant: str,
        what: ReadWhat,
        space: str | None,
        timeout: float,
        model: type[Reply],
        limit: int = 100,
        offset: int = 0,
        item_id: str | None = None,
        narrow: ListingFilter | None = None,
    ) -> Reply:
        body = ReadPayload(
            enqueued_at=0.0,
            tenant=tenant,
            what=what,
            space=space,
            item_id=item_id,
            limit=limit,
            offset=offset,
            narrow=narrow,
        )
        return self._call(TaskName.READ, body, timeout, model)

    def _admin(
        self,
        tenant: str,
        space: str,
        op: AdminOp,
        item_id: str | None,
        timeout: float,
        model: type[Reply],
        correction: FactCorrection | None = None,
    ) -> Reply:
        body = AdminPayload(
            enqueued_at=0.0, tenant=tenant, space=space, op=op, item_id=item_id,
            correction=correction,
        )  # fmt: skip
        return self._call(TaskName.ADMIN, body, timeout, model)

    def _call(self, name: TaskName, body: TaskPayload, timeout: float, model: type[Reply]) -> Reply:
        """Send a task, wait for its reply and validate it into the table's model for it (a
        failure raises its kind); then delete the reply from the result backend: replies
        carry memory, and erased memory must not linger there."""
        if name is not TaskName.ADMIN:  # an erasure still runs after its caller gave up
            body = body.model_copy(update={"reply_by": time.time() + timeout})
        pending = self._send(name, body)
        try:
            result = pending.get(timeout=timeout, interval=0.005)
        finally:
            pending.forget()
        raise_failure(result)
        reply = REPLIES[name, _what(body)].model_validate(result)
        assert isinstance(reply, model)  # `model` names the table's entry for the type checker
        return reply


def _what(body: TaskPayload) -> str | None:
    """What a read reads or an admin task does: with the task's name, the reply's key."""
    if isinstance(body, ReadPayload):
        return body.what
    return body.op if isinstance(body, AdminPayload) else None


def _question(
    tenant: str,
    space: str,
    question: str,
    k: int | None,
    mode: str | None,
    explain: bool,
    min_score: float | None,
    filters: SearchFilters | None,
    as_of: datetime | None = None,
    profiles: bool = False,
) -> QueryPayload:
    # `mode` arrives as any string (CLI, bench): validation refuses one that is no recall mode
    return QueryPayload.model_validate(
        dict(
            enqueued_at=0.0,
            tenant=tenant,
            space=space,
            question=question,
            k=k,
            mode=mode,
            explain=explain,
            min_score=min_score,
            filters=filters,
            as_of=as_of,
            profiles=profiles,
        )
    )
