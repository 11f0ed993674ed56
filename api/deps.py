"""What every route needs, as typed dependencies: the caller (a tenant's key or the admin's),
the tenant's memory service, the key store, the settings."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, TypeVar

import redis
from celery import Celery
from fastapi import Depends, HTTPException, Request, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from api.auth import Caller, Keys, KeyStore
from api.capacity import WaitSlots
from common.celery_config import celery_config
from common.observability import tracing
from common.producer import Producer
from common.service import TenantMemory
from common.settings import Settings
from common.store.coordination.budgets import model_counters
from common.store.coordination.roles import Coordination

T = TypeVar("T")


@dataclass
class Services:
    """Built once per API process, on startup: over the Redis queues (`build`), or over the
    embedded store and task graph in this process (`atommem serve`, `cli.serve`)."""

    settings: Settings
    keys: Keys
    producer: Producer
    slots: WaitSlots
    # The model endpoints' counters (`/v1/metrics/models`), and what closes this process's
    # clients (or its embedded worker and store) on shutdown.
    model_counters: Callable[[], dict[str, dict[str, int]]]
    close: Callable[[], None]

    @classmethod
    def build(cls, settings: Settings) -> Services:
        url = settings.broker.url
        if not url:
            raise RuntimeError(
                "the API sends work to the queues: set ATOMMEM_BROKER__URL (e.g. "
                "redis://127.0.0.1:6379/0) and run workers, or run `atommem serve` for one "
                "process over the embedded store"
            )
        app = Celery("atommem-api")
        app.conf.update(celery_config(settings))
        coord = Coordination.redis(url, settings.pipeline.job_ttl_s)
        producer = Producer(app, coord.jobs, coord.sequence)
        admin = settings.api.admin_key.get_secret_value() if settings.api.admin_key else None
        conn = redis.Redis.from_url(url, decode_responses=True)
        return cls(
            settings=settings,
            keys=KeyStore(conn, admin),
            producer=producer,
            slots=WaitSlots(settings.api),
            model_counters=lambda: model_counters(conn),
            close=conn.close,
        )

    def memory(self, tenant: str) -> TenantMemory:
        """The tenant's memory, its writes counted against its writes per minute and each
        call that waits on a worker holding one of the tenant's slots (`api.capacity`)."""
        return TenantMemory(
            self.producer,
            tenant,
            self.settings.api,
            quota=self.keys,
            waiting=self.slots.gate(tenant),
        )

    async def waiting(self, call: Callable[[], T]) -> T:
        """A route's call that may wait on a worker, on the waiting pool's threads (never the
        pool the key checks and Redis-only routes run in)."""
        return await self.slots.run(call)


def services(request: Request) -> Services:
    return request.app.state.services  # type: ignore[no-any-return]


ServicesDep = Annotated[Services, Depends(services)]
_bearer = HTTPBearer(auto_error=False, description="an API key: `Authorization: Bearer amk_…`")


def caller(
    svc: ServicesDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Caller:
    if credentials is None:
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            "missing API key: send `Authorization: Bearer <key>`",
            headers={"WWW-Authenticate": "Bearer"},
        )
    found = svc.keys.identify(credentials.credentials)
    if found is None:
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            "unknown or revoked API key",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return found


def tenant(who: Annotated[Caller, Depends(caller)]) -> str:
    """The caller's tenant; every memory route is confined to it (named on the request's
    span and log lines)."""
    if who.tenant is None:
        raise HTTPException(
            status.HTTP_403_FORBIDDEN, "the admin key manages tenants; use a tenant's key"
        )
    tracing.identify(tenant=who.tenant)
    return who.tenant


def admin(who: Annotated[Caller, Depends(caller)]) -> Caller:
    if not who.admin:
        raise HTTPException(status.HTTP_403_FORBIDDEN, "this route needs the admin key")
    return who


def memory(
    svc: ServicesDep, name: Annotated[str, Depends(tenant)], request: Request
) -> TenantMemory:
    """The caller's tenant's memory: every memory route is one call on it (the route's space
    named on the request's span and log lines)."""
    tracing.identify(space=request.path_params.get("space"))
    return svc.memory(name)


Tenant = Annotated[str, Depends(tenant)]
TenantMemoryDep = Annotated[TenantMemory, Depends(memory)]
Admin = Annotated[Caller, Depends(admin)]
