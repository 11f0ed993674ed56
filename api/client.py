"""The Python SDK for the AtomMem HTTP API, sync and async, with familiar verbs.

    from api.client import AtomMem
    mem = AtomMem("http://127.0.0.1:8080", api_key="amk_...")
    mem.create_space("alice")
    job = mem.add("alice", session)            # a finished session (dict or SessionInput)
    mem.wait(job["job_id"])
    mem.search("alice", "Where does Priya live?")["hits"]
    mem.ask("alice", "Where does Priya live?")["answer"]
    mem.get_all("alice")                        # every fact (or kind="events"/"profiles")
    mem.history("alice", fact_id); mem.delete("alice", fact_id=fact_id)

`AsyncAtomMem` has the same methods as coroutines. Errors raise `ApiError` subclasses that
match the server's classes: `NotFoundError` (404), `ConflictError` (409), `InvalidError`
(413/422/400), `RateLimited` (429, with `retry_after`), `ApiError` otherwise.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx
from pydantic import BaseModel

from common.errors import AtomMemError

Kind = Literal["facts", "events", "profiles"]
FINISHED = ("done", "failed")
PAGE = 500


class ApiError(AtomMemError):
    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"HTTP {status}: {detail}")
        self.status = status
        self.detail = detail


class NotFoundError(ApiError):
    pass


class ConflictError(ApiError):
    pass


class InvalidError(ApiError):
    pass


class RateLimited(ApiError):
    def __init__(self, status: int, detail: str, retry_after: float) -> None:
        super().__init__(status, detail)
        self.retry_after = retry_after


@dataclass(frozen=True)
class Call:
    """One request, built the same way for the sync and async clients."""

    method: str
    path: str
    json: Any = None
    params: dict[str, Any] = field(default_factory=dict)


def result(response: httpx.Response) -> Any:
    """The response's JSON, or the matching `ApiError`."""
    if response.status_code < 400:
        return response.json() if response.content else None
    try:
        detail = response.json().get("detail", response.text)
    except ValueError:
        detail = response.text
    text = detail if isinstance(detail, str) else str(detail)
    status = response.status_code
    if status == 404:
        raise NotFoundError(status, text)
    if status == 409:
        raise ConflictError(status, text)
    if status == 429:
        raise RateLimited(status, text, float(response.headers.get("Retry-After", "1")))
    if status in (400, 413, 422):
        raise InvalidError(status, text)
    raise ApiError(status, text)


def _session(session: dict[str, Any] | BaseModel) -> dict[str, Any]:
    if isinstance(session, BaseModel):
        return session.model_dump(mode="json", exclude_none=True)
    return session


def _query(question: str, k: int | None, mode: str | None) -> dict[str, Any]:
    body: dict[str, Any] = {"question": question}
    if k is not None:
        body["k"] = k
    if mode is not None:
        body["mode"] = mode
    return body


class Calls:
    """Every verb as a `Call` (the shared half of both clients)."""

    @staticmethod
    def create_space(name: str) -> Call:
        return Call("POST", "/v1/spaces", json={"name": name})

    @staticmethod
    def list_spaces() -> Call:
        return Call("GET", "/v1/spaces")

    @staticmethod
    def get_space(space: str) -> Call:
        return Call("GET", f"/v1/spaces/{space}")

    @staticmethod
    def delete_space(space: str) -> Call:
        return Call("DELETE", f"/v1/spaces/{space}")

    @staticmethod
    def add(space: str, session: dict[str, Any] | BaseModel) -> Call:
        return Call("POST", f"/v1/spaces/{space}/sessions", json=_session(session))

    @staticmethod
    def job(job_id: str) -> Call:
        return Call("GET", f"/v1/jobs/{job_id}")

    @staticmethod
    def search(space: str, question: str, k: int | None, mode: str | None) -> Call:
        return Call("POST", f"/v1/spaces/{space}/search", json=_query(question, k, mode))

    @staticmethod
    def ask(space: str, question: str, k: int | None, mode: str | None) -> Call:
        return Call("POST", f"/v1/spaces/{space}/ask", json=_query(question, k, mode))

    @staticmethod
    def page(space: str, kind: Kind, offset: int) -> Call:
        return Call("GET", f"/v1/spaces/{space}/{kind}", params={"limit": PAGE, "offset": offset})

    @staticmethod
    def get(space: str, item_id: str, kind: Kind) -> Call:
        return Call("GET", f"/v1/spaces/{space}/{kind}/{item_id}")

    @staticmethod
    def history(space: str, fact_id: str) -> Call:
        return Call("GET", f"/v1/spaces/{space}/facts/{fact_id}/history")

    @staticmethod
    def delete(space: str, fact_id: str | None, session_id: str | None) -> Call:
        if (fact_id is None) == (session_id is None):
            raise ValueError("delete one thing: fact_id=... or session_id=...")
        if fact_id is not None:
            return Call("DELETE", f"/v1/spaces/{space}/facts/{fact_id}")
        return Call("DELETE", f"/v1/spaces/{space}/sessions/{session_id}")


class _Waiting:
    """The bookkeeping of `wait`, shared by both clients."""

    def __init__(self, job_ids: str | Iterable[str], timeout: float) -> None:
        self.order = [job_ids] if isinstance(job_ids, str) else list(job_ids)
        self.deadline = time.monotonic() + timeout
        self.finished: dict[str, dict[str, Any]] = {}

    def todo(self) -> list[str]:
        return [j for j in self.order if j not in self.finished]

    def saw(self, job: dict[str, Any]) -> None:
        if job["state"] in FINISHED:
            self.finished[job["job_id"]] = job

    def result(self) -> list[dict[str, Any]] | None:
        """Every job once all finished; None while some run; TimeoutError past the deadline."""
        if len(self.finished) == len(self.order):
            return [self.finished[j] for j in self.order]
        if time.monotonic() > self.deadline:
            raise TimeoutError(f"{len(self.todo())} jobs still running")
        return None


class _Pages:
    """The bookkeeping of `get_all`."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []

    def add(self, page: dict[str, Any]) -> bool:
        """Take a page; True once every item is in."""
        self.items += page["items"]
        return not page["items"] or len(self.items) >= page["total"]


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

    def create_space(self, name: str) -> dict[str, Any]:
        return self._do(Calls.create_space(name))  # type: ignore[no-any-return]

    def list_spaces(self) -> list[dict[str, Any]]:
        return self._do(Calls.list_spaces())["items"]  # type: ignore[no-any-return]

    def get_space(self, space: str) -> dict[str, Any]:
        return self._do(Calls.get_space(space))  # type: ignore[no-any-return]

    def delete_space(self, space: str) -> dict[str, Any]:
        return self._do(Calls.delete_space(space))  # type: ignore[no-any-return]

    def add(self, space: str, session: dict[str, Any] | BaseModel) -> dict[str, Any]:
        """Queue a finished session; returns its job (poll it, or `wait`)."""
        return self._do(Calls.add(space, session))  # type: ignore[no-any-return]

    def job(self, job_id: str) -> dict[str, Any]:
        return self._do(Calls.job(job_id))  # type: ignore[no-any-return]

    def wait(
        self, job_ids: str | Iterable[str], timeout: float = 600.0, poll: float = 0.5
    ) -> list[dict[str, Any]]:
        """Block until every job is done or failed; TimeoutError names how many are not."""
        waiting = _Waiting(job_ids, timeout)
        while True:
            for job_id in waiting.todo():
                waiting.saw(self.job(job_id))
            done = waiting.result()
            if done is not None:
                return done
            time.sleep(poll)

    def search(
        self, space: str, question: str, k: int | None = None, mode: str | None = None
    ) -> dict[str, Any]:
        return self._do(Calls.search(space, question, k, mode))  # type: ignore[no-any-return]

    def ask(
        self, space: str, question: str, k: int | None = None, mode: str | None = None
    ) -> dict[str, Any]:
        return self._do(Calls.ask(space, question, k, mode))  # type: ignore[no-any-return]

    def get_all(self, space: str, kind: Kind = "facts") -> list[dict[str, Any]]:
        """Every fact (or event, or profile) of the space, page by page."""
        pages = _Pages()
        while not pages.add(self._do(Calls.page(space, kind, len(pages.items)))):
            pass
        return pages.items

    def get(self, space: str, item_id: str, kind: Kind = "facts") -> dict[str, Any]:
        return self._do(Calls.get(space, item_id, kind))  # type: ignore[no-any-return]

    def history(self, space: str, fact_id: str) -> dict[str, Any]:
        """A fact's earlier texts and which session replaced each, with its provenance."""
        return self._do(Calls.history(space, fact_id))  # type: ignore[no-any-return]

    def delete(
        self, space: str, fact_id: str | None = None, session_id: str | None = None
    ) -> dict[str, Any]:
        """Erase a fact, or a session's contribution; returns what was removed."""
        return self._do(Calls.delete(space, fact_id, session_id))  # type: ignore[no-any-return]


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

    async def create_space(self, name: str) -> dict[str, Any]:
        return await self._do(Calls.create_space(name))  # type: ignore[no-any-return]

    async def list_spaces(self) -> list[dict[str, Any]]:
        return (await self._do(Calls.list_spaces()))["items"]  # type: ignore[no-any-return]

    async def get_space(self, space: str) -> dict[str, Any]:
        return await self._do(Calls.get_space(space))  # type: ignore[no-any-return]

    async def delete_space(self, space: str) -> dict[str, Any]:
        return await self._do(Calls.delete_space(space))  # type: ignore[no-any-return]

    async def add(self, space: str, session: dict[str, Any] | BaseModel) -> dict[str, Any]:
        return await self._do(Calls.add(space, session))  # type: ignore[no-any-return]

    async def job(self, job_id: str) -> dict[str, Any]:
        return await self._do(Calls.job(job_id))  # type: ignore[no-any-return]

    async def wait(
        self, job_ids: str | Iterable[str], timeout: float = 600.0, poll: float = 0.5
    ) -> list[dict[str, Any]]:
        waiting = _Waiting(job_ids, timeout)
        while True:
            for job_id in waiting.todo():
                waiting.saw(await self.job(job_id))
            done = waiting.result()
            if done is not None:
                return done
            await asyncio.sleep(poll)

    async def search(
        self, space: str, question: str, k: int | None = None, mode: str | None = None
    ) -> dict[str, Any]:
        return await self._do(Calls.search(space, question, k, mode))  # type: ignore[no-any-return]

    async def ask(
        self, space: str, question: str, k: int | None = None, mode: str | None = None
    ) -> dict[str, Any]:
        return await self._do(Calls.ask(space, question, k, mode))  # type: ignore[no-any-return]

    async def get_all(self, space: str, kind: Kind = "facts") -> list[dict[str, Any]]:
        pages = _Pages()
        while not pages.add(await self._do(Calls.page(space, kind, len(pages.items)))):
            pass
        return pages.items

    async def get(self, space: str, item_id: str, kind: Kind = "facts") -> dict[str, Any]:
        return await self._do(Calls.get(space, item_id, kind))  # type: ignore[no-any-return]

    async def history(self, space: str, fact_id: str) -> dict[str, Any]:
        return await self._do(Calls.history(space, fact_id))  # type: ignore[no-any-return]

    async def delete(
        self, space: str, fact_id: str | None = None, session_id: str | None = None
    ) -> dict[str, Any]:
        return await self._do(Calls.delete(space, fact_id, session_id))  # type: ignore[no-any-return]
