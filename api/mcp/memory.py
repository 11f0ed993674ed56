"""What the MCP tools are written against: the `Memory` protocol, met by the SDK client over
HTTP (`api.client.AtomMem`) and by `ProducerMemory`, the producer confined to one tenant as
the API's routes use it (embedded store or queues)."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import Any, Protocol

import redis
from pydantic import BaseModel, ValidationError

from api.auth import KeyStore
from api.client import PAGES, Kind
from api.errors import first_error
from common.errors import AtomMemError, InvalidInput
from common.models.api import SessionBody, SpaceCreate
from common.models.jobs import AdminOp, Job, ReadWhat
from common.models.memory import Fact
from common.models.query import AskResponse, SearchResponse
from common.models.responses import ErasureReceipt, FactHistory, Page, Space, SpaceList
from common.producer import MemoryClient
from common.settings import ApiSettings


class Memory(Protocol):
    """One tenant's memory: the SDK's verbs, plus a page of a listing."""

    def list_spaces(self) -> list[Space]: ...

    def create_space(self, name: str) -> Space: ...

    def get_space(self, space: str) -> Space: ...

    def add(self, space: str, session: dict[str, Any] | BaseModel) -> Job: ...

    def job(self, job_id: str) -> Job: ...

    def search(
        self, space: str, question: str, k: int | None = None, mode: str | None = None
    ) -> SearchResponse: ...

    def ask(
        self, space: str, question: str, k: int | None = None, mode: str | None = None
    ) -> AskResponse: ...

    def page(self, space: str, kind: Kind, limit: int, offset: int) -> Page[Any]: ...

    def history(self, space: str, fact_id: str) -> FactHistory: ...

    def delete(
        self, space: str, fact_id: str | None = None, session_id: str | None = None
    ) -> ErasureReceipt: ...


class OverQuota(AtomMemError):
    """Over the tenant's writes per minute (the API's 429)."""


def erase_target(fact_id: str | None, session_id: str | None) -> tuple[AdminOp, str]:
    if fact_id is not None and session_id is None:
        return "erase_fact", fact_id
    if session_id is not None and fact_id is None:
        return "erase_session", session_id
    raise InvalidInput("erase one thing: a fact_id or a session_id")


class ProducerMemory:
    """A tenant's memory through the producer, as the API's routes reach it: the same limits,
    a space checked before a session is queued, reads on the query queue, erasure as an admin
    task. With `quota` (the API's key store), writes count against the tenant's writes per
    minute, and a refused write gives its place back, as on the routes."""

    def __init__(
        self,
        client: MemoryClient,
        tenant: str,
        limits: ApiSettings,
        quota: KeyStore | None = None,
    ) -> None:
        self._client = client
        self._tenant = tenant
        self._limits = limits
        self._quota = quota

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        if self._quota is None:
            yield
            return
        per_minute = self._limits.writes_per_minute
        counter, wait = self._quota.allow_write(self._tenant, per_minute)
        if wait is not None:
            raise OverQuota(
                f"over {per_minute} writes per minute for this tenant; try again in "
                f"{max(1, math.ceil(wait))}s"
            )
        try:
            yield
        except (AtomMemError, ValidationError):  # refused: nothing was written
            with contextlib.suppress(redis.RedisError):
                self._quota.refund_write(counter)
            raise

    def _read(self, what: ReadWhat, space: str | None = None, **options: Any) -> dict[str, Any]:
        return self._client.read(
            self._tenant, what, space, timeout=self._limits.query_timeout_s, **options
        )

    def _admin(self, space: str, op: AdminOp, item_id: str | None = None) -> dict[str, Any]:
        return self._client.admin(
            self._tenant, space, op, item_id, timeout=self._limits.admin_timeout_s
        )

    def list_spaces(self) -> list[Space]:
        return SpaceList.model_validate(self._read("spaces")).items

    def create_space(self, name: str) -> Space:
        SpaceCreate(name=name)  # the API's rule for names
        with self._writing():
            return Space.model_validate(self._admin(name, "create_space"))

    def get_space(self, space: str) -> Space:
        return Space.model_validate(self._read("space", space))

    def add(self, space: str, session: dict[str, Any] | BaseModel) -> Job:
        """Queue a finished session, once it passes the API's checks and its space exists."""
        if isinstance(session, SessionBody):
            body = session
        else:
            raw = session.model_dump(mode="json") if isinstance(session, BaseModel) else session
            body = SessionBody.model_validate(raw)
        body.check_limits(self._limits.max_turns, self._limits.max_text_chars)
        try:
            record = body.to_session()  # ingest's own checks: speakers, repeated turn ids
        except ValidationError as exc:
            raise InvalidInput(f"session: {first_error(exc.errors())}") from None
        with self._writing():
            self.get_space(space)  # not found when unknown, as on the route
            (job,) = self._client.submit(self._tenant, space, [record])
        return job

    def job(self, job_id: str) -> Job:
        return self._client.job(self._tenant, job_id)

    def search(
        self, space: str, question: str, k: int | None = None, mode: str | None = None
    ) -> SearchResponse:
        found = self._client.search(
            self._tenant, space, question, k=k, mode=mode, timeout=self._limits.query_timeout_s
        )
        return SearchResponse.model_validate(found)

    def ask(
        self, space: str, question: str, k: int | None = None, mode: str | None = None
    ) -> AskResponse:
        answered = self._client.ask(
            self._tenant, space, question, k=k, mode=mode, timeout=self._limits.query_timeout_s
        )
        return AskResponse.model_validate(answered)

    def page(self, space: str, kind: Kind, limit: int, offset: int) -> Page[Any]:
        return PAGES[kind].model_validate(self._read(kind, space, limit=limit, offset=offset))

    def history(self, space: str, fact_id: str) -> FactHistory:
        return FactHistory.of(Fact.model_validate(self._read("fact", space, item_id=fact_id)))

    def delete(
        self, space: str, fact_id: str | None = None, session_id: str | None = None
    ) -> ErasureReceipt:
        """Erase a fact, or a session's contribution; returns what was removed."""
        op, item_id = erase_target(fact_id, session_id)
        with self._writing():
            return ErasureReceipt.model_validate(self._admin(space, op, item_id))
