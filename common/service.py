"""One tenant's memory, as every front door serves it: the `Memory` protocol (the SDK's verbs)
and `TenantMemory`, which meets it through the producer with the deployment's limits, the
space check before a session is queued, the write quota with its refund, and the timeouts.
The HTTP routes, the MCP tools and the command line are each a thin layer over a `Memory`."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from datetime import UTC, date, datetime, timedelta
from typing import Any, Literal, Protocol, overload

import redis
from pydantic import BaseModel, ValidationError

from common.errors import AtomMemError, InvalidInput, NotFound, all_errors, first_error
from common.models import ids
from common.models.api import (
    FactCorrection,
    ListingFilter,
    RawSession,
    SearchFilters,
    SessionBody,
    SpaceCreate,
)
from common.models.jobs import Job, JobState
from common.models.memory import Event, Fact, Profile
from common.models.messages import MessagesBody, RawMessages, messages_body
from common.models.names import person_name
from common.models.query import CONTEXT_TOKENS, AskResponse, ContextResponse, SearchResponse
from common.models.responses import (
    CorrectionReceipt,
    ErasureReceipt,
    FactHistory,
    Kind,
    Page,
    SessionSummary,
    Space,
    StoredSession,
)
from common.models.session import SessionInput
from common.producer import Producer
from common.retrieval.context import compose
from common.settings import ApiSettings

Progress = Callable[[int], None]
PAGE = 500  # items per page when a whole listing is read


def _wall(when: datetime | None) -> datetime | None:
    """A caller's time as memory keeps times: naive wall-clock time (an offset dropped)."""
    return None if when is None else when.replace(tzinfo=None)


class Memory(Protocol):
    """One tenant's memory: met by `TenantMemory` (the producer) and by the SDK's `AtomMem`
    (a server over HTTP)."""

    def list_spaces(self) -> list[Space]: ...

    def create_space(self, name: str) -> Space: ...

    def get_space(self, space: str) -> Space: ...

    def delete_space(self, space: str) -> ErasureReceipt: ...

    def add(self, space: str, session: RawSession) -> Job: ...

    def add_many(self, items: Sequence[tuple[str, RawSession]]) -> list[Job]: ...

    def add_messages(
        self,
        space: str,
        messages: RawMessages,
        conversation_id: str | None = None,
        user: str | None = None,
        assistant: str | None = None,
    ) -> list[Job]: ...

    def job(self, job_id: str) -> Job: ...

    def wait(
        self,
        job_ids: Sequence[str],
        timeout: float | None = ...,
        *,
        on_progress: Progress | None = ...,
    ) -> list[Job]: ...

    def jobs(
        self,
        space: str | None = None,
        limit: int = 50,
        state: JobState | None = None,
        offset: int = 0,
    ) -> list[Job]: ...

    def search(
        self,
        space: str,
        question: str,
        k: int | None = None,
        mode: str | None = None,
        explain: bool = False,
        min_score: float | None = None,
        filters: SearchFilters | None = None,
        as_of: datetime | None = None,
    ) -> SearchResponse: ...

    def ask(
        self,
        space: str,
        question: str,
        k: int | None = None,
        mode: str | None = None,
        explain: bool = False,
        min_score: float | None = None,
        filters: SearchFilters | None = None,
        as_of: datetime | None = None,
    ) -> AskResponse: ...

    def context(
        self,
        space: str,
        question: str,
        max_tokens: int = ...,
        k: int | None = None,
        mode: str | None = None,
        min_score: float | None = None,
        filters: SearchFilters | None = None,
        as_of: datetime | None = None,
    ) -> ContextResponse: ...

    def page(
        self,
        space: str,
        kind: Kind,
        limit: int = ...,
        offset: int = ...,
        narrow: ListingFilter | None = None,
    ) -> Page[Any]: ...

    @overload
    def get_all(
        self, space: str, kind: Literal["facts"] = ..., narrow: ListingFilter | None = None
    ) -> list[Fact]: ...
    @overload
    def get_all(
        self, space: str, kind: Literal["events"], narrow: ListingFilter | None = None
    ) -> list[Event]: ...
    @overload
    def get_all(
        self, space: str, kind: Literal["profiles"], narrow: ListingFilter | None = None
    ) -> list[Profile]: ...

    def history(self, space: str, fact_id: str) -> FactHistory: ...

    def delete(
        self, space: str, fact_id: str | None = None, session_id: str | None = None
    ) -> ErasureReceipt: ...

    def correct_fact(
        self, space: str, fact_id: str, text: str, reason: str | None = None
    ) -> CorrectionReceipt: ...


def profiles_of(
    memory: Memory,
    space: str,
    person: str | None,
    as_of: date | None,
    narrow: ListingFilter | None = None,
) -> list[Profile]:
    """The space's profiles of `person` (every person's when None; names compare as every
    path compares them) that `narrow` lets through, each as it stood on `as_of` (those that
    did not hold yet left out), by person and start."""
    wanted = None if person is None else person_name(person)
    found = []
    for profile in memory.get_all(space, "profiles", narrow):
        if wanted is not None and person_name(profile.person) != wanted:
            continue
        state = profile if as_of is None else profile.as_of(as_of)
        if state is not None:
            found.append(state)
    return sorted(found, key=lambda p: (p.person, p.t_from, p.id))


class WriteQuota(Protocol):
    """A per-tenant count of writes in a minute's window (the API's key store)."""

    def allow_write(self, tenant: str, per_minute: int) -> tuple[str, float | None]: ...

    def refund_write(self, counter: str) -> None: ...


class OverQuota(AtomMemError):
    """Over one of the tenant's limits (the API's 429): its writes per minute, or its share of
    the requests waiting on workers (`api.capacity`); `retry_after` in whole seconds."""

    def __init__(self, message: str, wait_s: float) -> None:
        super().__init__(message)
        self.retry_after = max(1, math.ceil(wait_s))


def erase_target(
    fact_id: str | None, session_id: str | None
) -> tuple[Literal["erase_fact", "erase_session"], str]:
    if fact_id is not None and session_id is None:
        return "erase_fact", fact_id
    if session_id is not None and fact_id is None:
        return "erase_session", session_id
    raise InvalidInput("erase one thing: a fact_id or a session_id")


class TenantMemory:
    """A tenant's memory through the producer (embedded store or queues): the API's limits on
    a session, its space checked before it is queued, reads on the query queue and writes as
    admin tasks, each within its timeout. With `quota`, each write counts against the tenant's
    writes per minute, and a refused write gives its place back. With `waiting`, each call
    that waits on a worker's reply holds what it gives (the API's slot) while it waits."""

    def __init__(
        self,
        producer: Producer,
        tenant: str,
        limits: ApiSettings,
        quota: WriteQuota | None = None,
        waiting: Callable[[], AbstractContextManager[None]] | None = None,
    ) -> None:
        self.producer = producer
        self.tenant = tenant
        self._limits = limits
        self._quota = quota
        self._waiting = waiting or contextlib.nullcontext

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        if self._quota is None:
            yield
            return
        per_minute = self._limits.writes_per_minute
        counter, wait = self._quota.allow_write(self.tenant, per_minute)
        if wait is not None:
            raise OverQuota(f"over {per_minute} writes per minute for this tenant", wait)
        try:
            yield
        except (AtomMemError, ValidationError):  # refused: nothing was written
            # A refund that fails (Redis blipped) costs the caller one write, never the
            # answer to its request.
            with contextlib.suppress(redis.RedisError):
                self._quota.refund_write(counter)
            raise

    @property
    def _read_s(self) -> float:
        return self._limits.query_timeout_s

    @property
    def _admin_s(self) -> float:
        return self._limits.admin_timeout_s

    def list_spaces(self) -> list[Space]:
        with self._waiting():
            return self.producer.spaces(self.tenant, self._read_s).items

    def create_space(self, name: str) -> Space:
        """A new, empty space (`Conflict` when the name is taken)."""
        try:
            SpaceCreate(name=name)  # the API's rule for names: one a URL path can carry
        except ValidationError as exc:
            raise InvalidInput(f"space {first_error(exc.errors())}") from None
        with self._writing(), self._waiting():
            return self.producer.create_space(self.tenant, name, self._admin_s)

    def get_space(self, space: str) -> Space:
        with self._waiting():
            return self.producer.space(self.tenant, space, self._read_s)

    def delete_space(self, space: str) -> ErasureReceipt:
        """Erase the space with everything in it; sessions in flight are cancelled."""
        with self._writing(), self._waiting():
            return self.producer.erase(self.tenant, space, "erase_space", None, self._admin_s)

    def add(self, space: str, session: RawSession) -> Job:
        """Queue a finished session once it passes the API's checks and its space exists."""
        (job,) = self.add_many([(space, session)])
        return job

    def add_many(self, items: Sequence[tuple[str, RawSession]]) -> list[Job]:
        """Queue sessions of one or more spaces in one call (each space checked once, the
        call one write): every one gets its place in its space's sequence before any is
        sent."""
        with self._writing():
            sessions = [(space, self._checked(session)) for space, session in items]
            for space in dict.fromkeys(space for space, _ in sessions):
                self.get_space(space)  # not found when unknown
            return self.producer.submit_many(self.tenant, sessions)

    def add_messages(
        self,
        space: str,
        messages: RawMessages,
        conversation_id: str | None = None,
        user: str | None = None,
        assistant: str | None = None,
    ) -> list[Job]:
        """Queue plain chat messages as the sessions they make (`common.models.messages`):
        one job a session, in order. The same messages sent again are the same jobs, also
        when they carry no time (then the sessions' start is when they were first received,
        and a failed job is sent again as it was)."""
        try:
            body = MessagesBody.model_validate(
                messages_body(messages, conversation_id, user, assistant)
            )
        except ValidationError as exc:
            raise InvalidInput(f"messages: {all_errors(exc.errors())}") from None
        gap = timedelta(seconds=self._limits.message_gap_s)
        cut = body.sessions(datetime.now(UTC), gap)
        known: dict[int, Job] = {}
        for n, received in enumerate(cut):
            if received.timeless:
                job_id = ids.job_id(self.tenant, space, received.body.session_id)
                with contextlib.suppress(NotFound):
                    job = self.producer.job(self.tenant, job_id)
                    known[n] = self.retry(job_id) if job.state == "failed" else job
        fresh = iter(self.add_many([(space, r.body) for n, r in enumerate(cut) if n not in known]))
        return [known[n] if n in known else next(fresh) for n in range(len(cut))]

    def _checked(self, session: RawSession) -> SessionInput:
        """The session as ingest takes it. A `SessionInput` (read from a file) already is; any
        other body passes the API's schema, its limits and ingest's own checks."""
        if isinstance(session, SessionInput):
            return session
        if isinstance(session, SessionBody):
            body = session
        else:
            raw = session.model_dump(mode="json") if isinstance(session, BaseModel) else session
            body = SessionBody.model_validate(raw)
        body.check_limits(self._limits.max_turns, self._limits.max_text_chars)
        try:
            return body.to_session()  # ingest's own checks: speakers, repeated turn ids
        except ValidationError as exc:
            raise InvalidInput(f"session: {first_error(exc.errors())}") from None

    def job(self, job_id: str) -> Job:
        return self.producer.job(self.tenant, job_id)

    def wait(
        self,
        job_ids: Sequence[str],
        timeout: float | None = None,
        *,
        on_progress: Progress | None = None,
    ) -> list[Job]:
        """Block until every job is done or failed; report how many finished so far."""
        return self.producer.wait(self.tenant, job_ids, timeout, on_progress)

    def jobs(
        self,
        space: str | None = None,
        limit: int = 50,
        state: JobState | None = None,
        offset: int = 0,
    ) -> list[Job]:
        """The tenant's newest jobs (of one space, in one state, when given), newest first,
        after the `offset` newest of them."""
        return self.producer.recent_jobs(self.tenant, space, limit, state, offset)

    def retry(self, job_id: str) -> Job:
        """Send a failed (or stuck) job again."""
        return self.producer.retry(self.tenant, job_id)

    def search(
        self,
        space: str,
        question: str,
        k: int | None = None,
        mode: str | None = None,
        explain: bool = False,
        min_score: float | None = None,
        filters: SearchFilters | None = None,
        as_of: datetime | None = None,
    ) -> SearchResponse:
        """Ranked facts (with `explain`, the recall graph); hits below `min_score` (default
        `retrieval.min_relevance`) or outside `filters` are left out; `as_of` is when the
        question is asked (an offset is dropped: memory keeps wall-clock times)."""
        with self._waiting():
            return self.producer.search(
                self.tenant, space, question, k, self._read_s, mode, explain, min_score,
                filters, _wall(as_of),
            )  # fmt: skip

    def ask(
        self,
        space: str,
        question: str,
        k: int | None = None,
        mode: str | None = None,
        explain: bool = False,
        min_score: float | None = None,
        filters: SearchFilters | None = None,
        as_of: datetime | None = None,
    ) -> AskResponse:
        """An answer from memory with the facts it used."""
        with self._waiting():
            return self.producer.ask(
                self.tenant, space, question, self._read_s, k, mode, explain, min_score,
                filters, _wall(as_of),
            )  # fmt: skip

    def context(
        self,
        space: str,
        question: str,
        max_tokens: int = CONTEXT_TOKENS,
        k: int | None = None,
        mode: str | None = None,
        min_score: float | None = None,
        filters: SearchFilters | None = None,
        as_of: datetime | None = None,
    ) -> ContextResponse:
        """A prompt-ready block for the question (`common.retrieval.context`): the profiles
        in force at `as_of` (default now), the ranked facts, the events used, the turns not
        yet processed, within `max_tokens`."""
        asked = _wall(as_of) or datetime.now(UTC).replace(tzinfo=None)
        with self._waiting():
            found = self.producer.search(
                self.tenant, space, question, k, self._read_s, mode, False, min_score,
                filters, asked, profiles=True,
            )  # fmt: skip
        return compose(found, asked, max_tokens)

    def page(
        self,
        space: str,
        kind: Kind,
        limit: int = PAGE,
        offset: int = 0,
        narrow: ListingFilter | None = None,
    ) -> Page[Any]:
        """A page of the space's facts (in session order), events (in time order) or
        profiles, those `narrow` lets through."""
        with self._waiting():
            return self.producer.page(self.tenant, space, kind, limit, offset, self._read_s, narrow)

    @overload
    def get_all(
        self, space: str, kind: Literal["facts"] = ..., narrow: ListingFilter | None = None
    ) -> list[Fact]: ...
    @overload
    def get_all(
        self, space: str, kind: Literal["events"], narrow: ListingFilter | None = None
    ) -> list[Event]: ...
    @overload
    def get_all(
        self, space: str, kind: Literal["profiles"], narrow: ListingFilter | None = None
    ) -> list[Profile]: ...
    def get_all(
        self, space: str, kind: Kind = "facts", narrow: ListingFilter | None = None
    ) -> list[Any]:
        """Every fact (or event, or profile) of the space `narrow` lets through, page by
        page."""
        items: list[Any] = []
        while True:
            page = self.page(space, kind, PAGE, len(items), narrow)
            items += page.items
            if not page.items or len(items) >= page.total:
                return items

    @overload
    def get(self, space: str, item_id: str, kind: Literal["facts"] = ...) -> Fact: ...
    @overload
    def get(self, space: str, item_id: str, kind: Literal["events"]) -> Event: ...
    @overload
    def get(self, space: str, item_id: str, kind: Literal["profiles"]) -> Profile: ...
    def get(self, space: str, item_id: str, kind: Kind = "facts") -> Fact | Event | Profile:
        """One fact, event or profile by id, with its history and provenance."""
        with self._waiting():
            return self.producer.record(self.tenant, space, kind, item_id, self._read_s)

    def history(self, space: str, fact_id: str) -> FactHistory:
        return FactHistory.of(self.get(space, fact_id))

    def session_page(self, space: str, limit: int = PAGE, offset: int = 0) -> Page[SessionSummary]:
        """Stored sessions in session order, with their commit state and what each added."""
        with self._waiting():
            return self.producer.sessions(self.tenant, space, limit, offset, self._read_s)

    def session(self, space: str, session_id: str) -> StoredSession:
        """A stored session with its turns, as submitted."""
        with self._waiting():
            return self.producer.stored_session(self.tenant, space, session_id, self._read_s)

    def delete(
        self, space: str, fact_id: str | None = None, session_id: str | None = None
    ) -> ErasureReceipt:
        """Erase a fact, or a session's contribution; returns what was removed."""
        op, item_id = erase_target(fact_id, session_id)
        with self._writing(), self._waiting():
            return self.producer.erase(self.tenant, space, op, item_id, self._admin_s)

    def correct_fact(
        self, space: str, fact_id: str, text: str, reason: str | None = None
    ) -> CorrectionReceipt:
        """Rewrite a fact's text, verified against the space (`common.memory.correct`): its
        old text goes into its history, what was built from it is rebuilt."""
        try:
            correction = FactCorrection(text=text, reason=reason)
        except ValidationError as exc:
            raise InvalidInput(f"correction: {all_errors(exc.errors())}") from None
        with self._writing(), self._waiting():
            return self.producer.correct(self.tenant, space, fact_id, correction, self._admin_s)

    def rebuild(self, source: str, into: str) -> list[Job]:
        """Re-run the stored sessions of `source` into `into` as ordinary jobs (an operator's
        call: it re-extracts the whole space)."""
        with self._waiting():
            return self.producer.rebuild(self.tenant, source, into, self._admin_s)

    def flush_profiles(self, space: str) -> None:
        """Run the space's profile batch now, and wait for it."""
        with self._waiting():
            self.producer.flush_profiles(self.tenant, space, self._admin_s)
