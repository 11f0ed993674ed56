"""The Python SDK for the AtomMem HTTP API, sync and async, with familiar verbs.

    from api.client import AtomMem
    mem = AtomMem("http://127.0.0.1:8080", api_key="amk_...")
    mem.create_space("alice")
    job = mem.add("alice", session)            # a finished session (dict or SessionInput)
    jobs = mem.add_messages("alice", [{"role": "user", "content": "I moved to Denver"}])
    mem.wait(job.job_id)
    mem.search("alice", "Where does Priya live?").hits
    mem.ask("alice", "Where does Priya live?").answer
    facts = mem.get_all("alice")               # every Fact (or kind="events"/"profiles")
    mem.history("alice", facts[0].id); mem.delete("alice", fact_id=facts[0].id)
    mem.correct_fact("alice", facts[1].id, "Priya lives in Boulder.", reason="misheard")
    mem.sessions("alice"); mem.jobs("alice")  # stored sessions in order; newest jobs

Replies are the server's pydantic models (`Job`, `SearchResponse`, `Fact`, `Space`, ...).
`AsyncAtomMem` has the same methods as coroutines. Errors raise `ApiError` subclasses that
match the server's classes: `NotFoundError` (404), `ConflictError` (409), `InvalidError`
(413/422/400), `RateLimited` (429) and `Unavailable` (503, 504), both with `retry_after`,
`ApiError` otherwise. Every id goes into the URL as one quoted path segment; one no URL
keeps as it is ('', '.', '..') is a ValueError before anything is sent.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any, Literal, overload
from urllib.parse import quote

import httpx
from pydantic import BaseModel

from common.errors import AtomMemError, Conflict, InvalidInput, NotFound
from common.models.api import ListingFilter, RawSession, SearchFilters
from common.models.jobs import FINISHED, Job, JobState
from common.models.memory import Event, Fact, Profile
from common.models.messages import RawMessages, messages_body
from common.models.query import CONTEXT_TOKENS, AskResponse, ContextResponse, SearchResponse
from common.models.responses import (
    PAGES,
    RECORDS,
    CorrectionReceipt,
    ErasureReceipt,
    FactHistory,
    JobList,
    Kind,
    Page,
    SessionSummary,
    Space,
    SpaceList,
    StoredSession,
)

PAGE = 500


class ApiError(AtomMemError):
    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"HTTP {status}: {detail}")
        self.status = status
        self.detail = detail


class NotFoundError(ApiError, NotFound):
    pass


class ConflictError(ApiError, Conflict):
    pass


class InvalidError(ApiError, InvalidInput):
    pass


class RateLimited(ApiError):
    def __init__(self, status: int, detail: str, retry_after: float) -> None:
        super().__init__(status, detail)
        self.retry_after = retry_after


class Unavailable(ApiError):
    """The server's Redis or workers do not answer (503, 504): try again after `retry_after`."""

    def __init__(self, status: int, detail: str, retry_after: float) -> None:
        super().__init__(status, detail)
        self.retry_after = retry_after


def segment(value: str) -> str:
    """`value` as one URL path segment. '', '.' and '..' cannot be one: a URL resolves them
    against the path around them, and the request would reach another resource."""
    if value in ("", ".", ".."):
        raise ValueError(f"{value!r} cannot be a path segment: no space, session or item has it")
    return quote(value, safe="")


@dataclass(frozen=True)
class Call:
    """One request, built the same way for the sync and async clients."""

    method: str
    path: str
    json: Any = None
    params: Mapping[str, str | int] = field(default_factory=dict)


def result(response: httpx.Response) -> Any:
    """The response's JSON, or the matching `ApiError`."""
    if response.status_code < 400:
        return response.json() if response.content else None
    try:
        body = response.json()
    except ValueError:
        body = None
    detail = body.get("detail", response.text) if isinstance(body, dict) else response.text
    text = detail if isinstance(detail, str) else str(detail)
    status = response.status_code
    if status == 404:
        raise NotFoundError(status, text)
    if status == 409:
        raise ConflictError(status, text)
    try:
        retry_after = float(response.headers.get("Retry-After", "1"))
    except ValueError:  # an HTTP date, from a proxy
        retry_after = 1.0
    if not math.isfinite(retry_after) or retry_after < 0:
        retry_after = 1.0
    if status == 429:
        raise RateLimited(status, text, retry_after)
    if status in (503, 504):
        raise Unavailable(status, text, retry_after)
    if status in (400, 413, 422):
        raise InvalidError(status, text)
    raise ApiError(status, text)


def _session(session: RawSession) -> object:
    if isinstance(session, BaseModel):
        return session.model_dump(mode="json", exclude_none=True)
    return session


@dataclass(frozen=True)
class Recall:
    """A search's, an ask's or a context's options, as the body sends them (unset ones left
    out)."""

    k: int | None = None
    mode: str | None = None
    explain: bool = False
    min_score: float | None = None
    filters: SearchFilters | Mapping[str, object] | None = None
    as_of: datetime | None = None
    max_tokens: int | None = None  # a context block's

    def body(self, question: str) -> dict[str, object]:
        body: dict[str, object] = {"question": question}
        if self.as_of is not None:
            body["as_of"] = self.as_of.isoformat()
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        if self.k is not None:
            body["k"] = self.k
        if self.mode is not None:
            body["mode"] = self.mode
        if self.explain:
            body["explain"] = True
        if self.min_score is not None:
            body["min_score"] = self.min_score
        if isinstance(self.filters, BaseModel):
            body["filters"] = self.filters.model_dump(mode="json", exclude_none=True)
        elif self.filters is not None:
            body["filters"] = dict(self.filters)
        return body


def path(*parts: str) -> str:
    """`/v1/...` from its parts, each one quoted path segment."""
    return "/v1/" + "/".join(segment(p) for p in parts)


class Calls:
    """Every verb as a `Call` (the shared half of both clients)."""

    @staticmethod
    def create_space(name: str) -> Call:
        return Call("POST", path("spaces"), json={"name": name})

    @staticmethod
    def list_spaces() -> Call:
        return Call("GET", path("spaces"))

    @staticmethod
    def get_space(space: str) -> Call:
        return Call("GET", path("spaces", space))

    @staticmethod
    def delete_space(space: str) -> Call:
        return Call("DELETE", path("spaces", space))

    @staticmethod
    def add(space: str, session: RawSession) -> Call:
        return Call("POST", path("spaces", space, "sessions"), json=_session(session))

    @staticmethod
    def add_messages(
        space: str,
        messages: RawMessages,
        conversation_id: str | None,
        user: str | None,
        assistant: str | None,
    ) -> Call:
        body = messages_body(messages, conversation_id, user, assistant)
        return Call("POST", path("spaces", space, "messages"), json=body)

    @staticmethod
    def job(job_id: str) -> Call:
        return Call("GET", path("jobs", job_id))

    @staticmethod
    def jobs(space: str | None, limit: int, state: JobState | None, offset: int) -> Call:
        params: dict[str, str | int] = {"limit": limit, "offset": offset}
        params |= ({"space": space} if space else {}) | ({"state": state} if state else {})
        return Call("GET", path("jobs"), params=params)

    @staticmethod
    def sessions(space: str, offset: int) -> Call:
        params = {"limit": PAGE, "offset": offset}
        return Call("GET", path("spaces", space, "sessions"), params=params)

    @staticmethod
    def session(space: str, session_id: str) -> Call:
        return Call("GET", path("spaces", space, "sessions", session_id))

    @staticmethod
    def search(space: str, question: str, recall: Recall) -> Call:
        return Call("POST", path("spaces", space, "search"), json=recall.body(question))

    @staticmethod
    def ask(space: str, question: str, recall: Recall) -> Call:
        return Call("POST", path("spaces", space, "ask"), json=recall.body(question))

    @staticmethod
    def context(space: str, question: str, recall: Recall) -> Call:
        return Call("POST", path("spaces", space, "context"), json=recall.body(question))

    @staticmethod
    def profiles(space: str, person: str | None, as_of: date | None, offset: int) -> Call:
        params: dict[str, str | int] = {"limit": PAGE, "offset": offset}
        if person is not None:
            params["person"] = person
        if as_of is not None:
            params["as_of"] = as_of.isoformat()
        return Call("GET", path("spaces", space, "profiles"), params=params)

    @staticmethod
    def page(
        space: str, kind: Kind, offset: int, limit: int = PAGE, narrow: ListingFilter | None = None
    ) -> Call:
        params: dict[str, Any] = {"limit": limit, "offset": offset}
        if narrow is not None:
            narrow.check_listing(kind)
            params |= {
                name: value
                for name, value in (
                    ("text", narrow.text),
                    ("session_id", narrow.session_ids),
                    ("event_id", narrow.event_ids),
                    ("id", narrow.ids),
                )
                if value is not None
            }
        return Call("GET", path("spaces", space, kind), params=params)

    @staticmethod
    def get(space: str, item_id: str, kind: Kind) -> Call:
        return Call("GET", path("spaces", space, kind, item_id))

    @staticmethod
    def history(space: str, fact_id: str) -> Call:
        return Call("GET", path("spaces", space, "facts", fact_id, "history"))

    @staticmethod
    def delete(space: str, fact_id: str | None, session_id: str | None) -> Call:
        if fact_id is not None and session_id is None:
            return Call("DELETE", path("spaces", space, "facts", fact_id))
        if session_id is not None and fact_id is None:
            return Call("DELETE", path("spaces", space, "sessions", session_id))
        raise ValueError("delete one thing: fact_id=... or session_id=...")

    @staticmethod
    def correct_fact(space: str, fact_id: str, text: str, reason: str | None) -> Call:
        body = {"text": text} | ({"reason": reason} if reason is not None else {})
        return Call("PATCH", path("spaces", space, "facts", fact_id), json=body)


class _Waiting:
    """The bookkeeping of `wait`, shared by both clients."""

    def __init__(
        self,
        job_ids: str | Iterable[str],
        timeout: float | None,
        on_progress: Callable[[int], None] | None,
    ) -> None:
        self.order = [job_ids] if isinstance(job_ids, str) else list(job_ids)
        self.deadline = None if timeout is None else time.monotonic() + timeout
        self.on_progress = on_progress
        self.finished: dict[str, Job] = {}

    def todo(self) -> list[str]:
        return [j for j in self.order if j not in self.finished]

    def saw(self, job: Job) -> None:
        if job.state in FINISHED:
            self.finished[job.job_id] = job

    def result(self) -> list[Job] | None:
        """Every job once all finished; None while some run; TimeoutError past the deadline."""
        if self.on_progress is not None:
            self.on_progress(len(self.finished))
        if len(self.finished) == len(self.order):
            return [self.finished[j] for j in self.order]
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise TimeoutError(f"{len(self.todo())} jobs still running")
        return None


class _Pages:
    """The bookkeeping of `get_all` (and of `sessions`)."""

    def __init__(self, page: type[Page[Any]]) -> None:
        self.page = page
        self.items: list[Any] = []

    def add(self, reply: Any) -> bool:
        """Take a page; True once every item is in."""
        page = self.page.model_validate(reply)
        self.items += page.items
        return not page.items or len(self.items) >= page.total


class AtomMem:
    """Blocking client."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        timeout: float = 120.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._http = httpx.Client(
            base_url=base_url.rstrip("/"),
            headers={"Authorization": f"Bearer {api_key}"},
            timeout=timeout,
            transport=transport,
        )

    def __enter__(self) -> AtomMem:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _do(self, call: Call) -> Any:
        response = self._http.request(
            call.method, call.path, json=call.json, params=call.params or None
        )
        return result(response)

    def create_space(self, name: str) -> Space:
        return Space.model_validate(self._do(Calls.create_space(name)))

    def list_spaces(self) -> list[Space]:
        return SpaceList.model_validate(self._do(Calls.list_spaces())).items

    def get_space(self, space: str) -> Space:
        return Space.model_validate(self._do(Calls.get_space(space)))

    def delete_space(self, space: str) -> ErasureReceipt:
        return ErasureReceipt.model_validate(self._do(Calls.delete_space(space)))

    def add(self, space: str, session: RawSession) -> Job:
        """Queue a finished session; returns its job (poll it, or `wait`)."""
        return Job.model_validate(self._do(Calls.add(space, session)))

    def add_many(self, items: Iterable[tuple[str, RawSession]]) -> list[Job]:
        """Queue sessions in order, each `(space, session)`; their jobs in the same order."""
        return [self.add(space, session) for space, session in items]

    def add_messages(
        self,
        space: str,
        messages: RawMessages,
        conversation_id: str | None = None,
        user: str | None = None,
        assistant: str | None = None,
    ) -> list[Job]:
        """Queue a chat's plain messages (`[{"role", "content", "name"?, "created_at"?}]`):
        the jobs of the sessions they make, in order. `user` and `assistant` name who speaks
        in `user` and `assistant` messages (a message's `name` wins)."""
        call = Calls.add_messages(space, messages, conversation_id, user, assistant)
        return JobList.model_validate(self._do(call)).items

    def job(self, job_id: str) -> Job:
        return Job.model_validate(self._do(Calls.job(job_id)))

    def wait(
        self,
        job_ids: str | Iterable[str],
        timeout: float | None = 600.0,
        poll: float = 0.5,
        *,
        on_progress: Callable[[int], None] | None = None,
    ) -> list[Job]:
        """Block until every job is done or failed (`timeout=None`: however long it takes);
        `on_progress` hears how many finished so far. TimeoutError names how many are not."""
        waiting = _Waiting(job_ids, timeout, on_progress)
        while True:
            for job_id in waiting.todo():
                waiting.saw(self.job(job_id))
            done = waiting.result()
            if done is not None:
                return done
            time.sleep(poll)

    def jobs(
        self,
        space: str | None = None,
        limit: int = 50,
        state: JobState | None = None,
        offset: int = 0,
    ) -> list[Job]:
        """The tenant's newest jobs (of one space, in one state, when given), newest first,
        after the `offset` newest of them."""
        call = Calls.jobs(space, limit, state, offset)
        return JobList.model_validate(self._do(call)).items

    def sessions(self, space: str) -> list[SessionSummary]:
        """Every stored session of the space, in session order."""
        pages = _Pages(Page[SessionSummary])
        while not pages.add(self._do(Calls.sessions(space, len(pages.items)))):
            pass
        return pages.items

    def session(self, space: str, session_id: str) -> StoredSession:
        """A stored session with its turns."""
        return StoredSession.model_validate(self._do(Calls.session(space, session_id)))

    def search(
        self,
        space: str,
        question: str,
        k: int | None = None,
        mode: str | None = None,
        explain: bool = False,
        min_score: float | None = None,
        filters: SearchFilters | Mapping[str, object] | None = None,
        as_of: datetime | None = None,
    ) -> SearchResponse:
        """Ranked facts, each with its `relevance` in [0, 1]; `min_score` drops weak ones
        (default: the server's `retrieval.min_relevance`), `filters` keeps facts said in a
        time range, of given sessions or naming given people (`SearchFilters` or its dict);
        `as_of` is when the question is asked (default now); `explain=True` adds the recall
        graph (`graph`)."""
        recall = Recall(k, mode, explain, min_score, filters, as_of)
        found = self._do(Calls.search(space, question, recall))
        return SearchResponse.model_validate(found)

    def ask(
        self,
        space: str,
        question: str,
        k: int | None = None,
        mode: str | None = None,
        explain: bool = False,
        min_score: float | None = None,
        filters: SearchFilters | Mapping[str, object] | None = None,
        as_of: datetime | None = None,
    ) -> AskResponse:
        """An answer from the facts `search` would return, with its evidence."""
        recall = Recall(k, mode, explain, min_score, filters, as_of)
        return AskResponse.model_validate(self._do(Calls.ask(space, question, recall)))

    def context(
        self,
        space: str,
        question: str,
        max_tokens: int = CONTEXT_TOKENS,
        k: int | None = None,
        mode: str | None = None,
        min_score: float | None = None,
        filters: SearchFilters | Mapping[str, object] | None = None,
        as_of: datetime | None = None,
    ) -> ContextResponse:
        """A block to place in a prompt as it is (`.text`): the profiles in force at `as_of`
        (default now), the ranked facts with dates and sessions, the events used, the turns
        not yet processed, each line labelled ([P1], [F1], ...) with what it cites in
        `.items`, within `max_tokens`."""
        recall = Recall(k, mode, False, min_score, filters, as_of, max_tokens)
        return ContextResponse.model_validate(self._do(Calls.context(space, question, recall)))

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
        pages = _Pages(PAGES[kind])
        while not pages.add(self._do(Calls.page(space, kind, len(pages.items), PAGE, narrow))):
            pass
        return pages.items

    def profiles(
        self, space: str, person: str | None = None, as_of: date | None = None
    ) -> list[Profile]:
        """A person's profiles (everyone's when `person` is None), each as it stood on
        `as_of` (default: as it stands): "where did she live in April?"."""
        pages = _Pages(Page[Profile])
        while not pages.add(self._do(Calls.profiles(space, person, as_of, len(pages.items)))):
            pass
        return pages.items

    @overload
    def get(self, space: str, item_id: str, kind: Literal["facts"] = ...) -> Fact: ...
    @overload
    def get(self, space: str, item_id: str, kind: Literal["events"]) -> Event: ...
    @overload
    def get(self, space: str, item_id: str, kind: Literal["profiles"]) -> Profile: ...
    def get(self, space: str, item_id: str, kind: Kind = "facts") -> Fact | Event | Profile:
        return RECORDS[kind].model_validate(self._do(Calls.get(space, item_id, kind)))

    def page(
        self,
        space: str,
        kind: Kind,
        limit: int = PAGE,
        offset: int = 0,
        narrow: ListingFilter | None = None,
    ) -> Page[Any]:
        """One page of the space's facts (or events in time order, or profiles) that `narrow`
        lets through (by words of their text, sessions, events or ids); `total` counts them
        all."""
        call = Calls.page(space, kind, offset, limit, narrow)
        return PAGES[kind].model_validate(self._do(call))

    def history(self, space: str, fact_id: str) -> FactHistory:
        """A fact's earlier texts and which session replaced each, with its provenance."""
        return FactHistory.model_validate(self._do(Calls.history(space, fact_id)))

    def delete(
        self, space: str, fact_id: str | None = None, session_id: str | None = None
    ) -> ErasureReceipt:
        """Erase a fact, or a session's contribution; returns what was removed."""
        return ErasureReceipt.model_validate(self._do(Calls.delete(space, fact_id, session_id)))

    def correct_fact(
        self, space: str, fact_id: str, text: str, reason: str | None = None
    ) -> CorrectionReceipt:
        """Rewrite a fact's text, verified against the space; its old text stays in its
        history. `ConflictError` when another fact already says it."""
        reply = self._do(Calls.correct_fact(space, fact_id, text, reason))
        return CorrectionReceipt.model_validate(reply)


class AsyncAtomMem:
    """The same verbs as coroutines."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        timeout: float = 120.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._http = httpx.AsyncClient(
            base_url=base_url.rstrip("/"),
            headers={"Authorization": f"Bearer {api_key}"},
            timeout=timeout,
            transport=transport,
        )

    async def __aenter__(self) -> AsyncAtomMem:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._http.aclose()

    async def _do(self, call: Call) -> Any:
        response = await self._http.request(
            call.method, call.path, json=call.json, params=call.params or None
        )
        return result(response)

    async def create_space(self, name: str) -> Space:
        return Space.model_validate(await self._do(Calls.create_space(name)))

    async def list_spaces(self) -> list[Space]:
        return SpaceList.model_validate(await self._do(Calls.list_spaces())).items

    async def get_space(self, space: str) -> Space:
        return Space.model_validate(await self._do(Calls.get_space(space)))

    async def delete_space(self, space: str) -> ErasureReceipt:
        return ErasureReceipt.model_validate(await self._do(Calls.delete_space(space)))

    async def add(self, space: str, session: RawSession) -> Job:
        return Job.model_validate(await self._do(Calls.add(space, session)))

    async def add_messages(
        self,
        space: str,
        messages: RawMessages,
        conversation_id: str | None = None,
        user: str | None = None,
        assistant: str | None = None,
    ) -> list[Job]:
        call = Calls.add_messages(space, messages, conversation_id, user, assistant)
        return JobList.model_validate(await self._do(call)).items

    async def add_many(self, items: Iterable[tuple[str, RawSession]]) -> list[Job]:
        return [await self.add(space, session) for space, session in items]

    async def job(self, job_id: str) -> Job:
        return Job.model_validate(await self._do(Calls.job(job_id)))

    async def wait(
        self,
        job_ids: str | Iterable[str],
        timeout: float | None = 600.0,
        poll: float = 0.5,
        *,
        on_progress: Callable[[int], None] | None = None,
    ) -> list[Job]:
        waiting = _Waiting(job_ids, timeout, on_progress)
        while True:
            for job_id in waiting.todo():
                waiting.saw(await self.job(job_id))
            done = waiting.result()
            if done is not None:
                return done
            await asyncio.sleep(poll)

    async def jobs(
        self,
        space: str | None = None,
        limit: int = 50,
        state: JobState | None = None,
        offset: int = 0,
    ) -> list[Job]:
        call = Calls.jobs(space, limit, state, offset)
        return JobList.model_validate(await self._do(call)).items

    async def sessions(self, space: str) -> list[SessionSummary]:
        pages = _Pages(Page[SessionSummary])
        while not pages.add(await self._do(Calls.sessions(space, len(pages.items)))):
            pass
        return pages.items

    async def session(self, space: str, session_id: str) -> StoredSession:
        return StoredSession.model_validate(await self._do(Calls.session(space, session_id)))

    async def search(
        self,
        space: str,
        question: str,
        k: int | None = None,
        mode: str | None = None,
        explain: bool = False,
        min_score: float | None = None,
        filters: SearchFilters | Mapping[str, object] | None = None,
        as_of: datetime | None = None,
    ) -> SearchResponse:
        recall = Recall(k, mode, explain, min_score, filters, as_of)
        found = await self._do(Calls.search(space, question, recall))
        return SearchResponse.model_validate(found)

    async def ask(
        self,
        space: str,
        question: str,
        k: int | None = None,
        mode: str | None = None,
        explain: bool = False,
        min_score: float | None = None,
        filters: SearchFilters | Mapping[str, object] | None = None,
        as_of: datetime | None = None,
    ) -> AskResponse:
        recall = Recall(k, mode, explain, min_score, filters, as_of)
        asked = await self._do(Calls.ask(space, question, recall))
        return AskResponse.model_validate(asked)

    async def context(
        self,
        space: str,
        question: str,
        max_tokens: int = CONTEXT_TOKENS,
        k: int | None = None,
        mode: str | None = None,
        min_score: float | None = None,
        filters: SearchFilters | Mapping[str, object] | None = None,
        as_of: datetime | None = None,
    ) -> ContextResponse:
        recall = Recall(k, mode, False, min_score, filters, as_of, max_tokens)
        found = await self._do(Calls.context(space, question, recall))
        return ContextResponse.model_validate(found)

    @overload
    async def get_all(
        self, space: str, kind: Literal["facts"] = ..., narrow: ListingFilter | None = None
    ) -> list[Fact]: ...
    @overload
    async def get_all(
        self, space: str, kind: Literal["events"], narrow: ListingFilter | None = None
    ) -> list[Event]: ...
    @overload
    async def get_all(
        self, space: str, kind: Literal["profiles"], narrow: ListingFilter | None = None
    ) -> list[Profile]: ...
    async def get_all(
        self, space: str, kind: Kind = "facts", narrow: ListingFilter | None = None
    ) -> list[Any]:
        pages = _Pages(PAGES[kind])
        while not pages.add(
            await self._do(Calls.page(space, kind, len(pages.items), PAGE, narrow))
        ):
            pass
        return pages.items

    async def profiles(
        self, space: str, person: str | None = None, as_of: date | None = None
    ) -> list[Profile]:
        pages = _Pages(Page[Profile])
        while not pages.add(await self._do(Calls.profiles(space, person, as_of, len(pages.items)))):
            pass
        return pages.items

    @overload
    async def get(self, space: str, item_id: str, kind: Literal["facts"] = ...) -> Fact: ...
    @overload
    async def get(self, space: str, item_id: str, kind: Literal["events"]) -> Event: ...
    @overload
    async def get(self, space: str, item_id: str, kind: Literal["profiles"]) -> Profile: ...
    async def get(self, space: str, item_id: str, kind: Kind = "facts") -> Fact | Event | Profile:
        return RECORDS[kind].model_validate(await self._do(Calls.get(space, item_id, kind)))

    async def page(
        self,
        space: str,
        kind: Kind,
        limit: int = PAGE,
        offset: int = 0,
        narrow: ListingFilter | None = None,
    ) -> Page[Any]:
        call = Calls.page(space, kind, offset, limit, narrow)
        return PAGES[kind].model_validate(await self._do(call))

    async def history(self, space: str, fact_id: str) -> FactHistory:
        return FactHistory.model_validate(await self._do(Calls.history(space, fact_id)))

    async def delete(
        self, space: str, fact_id: str | None = None, session_id: str | None = None
    ) -> ErasureReceipt:
        erased = await self._do(Calls.delete(space, fact_id, session_id))
        return ErasureReceipt.model_validate(erased)

    async def correct_fact(
        self, space: str, fact_id: str, text: str, reason: str | None = None
    ) -> CorrectionReceipt:
        reply = await self._do(Calls.correct_fact(space, fact_id, text, reason))
        return CorrectionReceipt.model_validate(reply)
