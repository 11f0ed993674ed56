"""What every route needs, as typed dependencies: the caller's tenant, the producer client,
the key store, the settings."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated

import pydantic
import redis
from celery import Celery
from fastapi import Depends, HTTPException, Request, status
from fastapi.exceptions import RequestValidationError
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from api.auth import Caller, KeyStore
from common.celery_config import celery_config
from common.errors import AtomMemError
from common.producer import MemoryClient
from common.settings import Settings
from common.store.coordination import Coordination


@dataclass
class Services:
    """Built once per API process, on startup."""

    settings: Settings
    redis: redis.Redis
    keys: KeyStore
    client: MemoryClient

    @classmethod
    def build(cls, settings: Settings) -> Services:
        url = settings.broker.url
        if not url:
            raise RuntimeError(
                "the API sends work to the queues: set ATOMMEM_BROKER__URL (e.g. "
                "redis://127.0.0.1:6379/0) and run workers"
            )
        app = Celery("atommem-api")
        app.conf.update(celery_config(settings))
        coord = Coordination.redis(url, settings.pipeline.job_ttl_s)
        client = MemoryClient(app, coord.jobs, coord.sequence)
        admin = settings.api.admin_key.get_secret_value() if settings.api.admin_key else None
        conn = redis.Redis.from_url(url, decode_responses=True)
        return cls(settings=settings, redis=conn, keys=KeyStore(conn, admin), client=client)


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
    """The caller's tenant; every memory route is confined to it."""
    if who.tenant is None:
        raise HTTPException(
            status.HTTP_403_FORBIDDEN, "the admin key manages tenants; use a tenant's key"
        )
    return who.tenant


def admin(who: Annotated[Caller, Depends(caller)]) -> Caller:
    if not who.admin:
        raise HTTPException(status.HTTP_403_FORBIDDEN, "this route needs the admin key")
    return who


def refused(exc: Exception) -> bool:
    """Whether a request failed with a 4xx: the caller's mistake, and nothing was written."""
    if isinstance(exc, HTTPException):
        return exc.status_code < 500
    return isinstance(exc, RequestValidationError | pydantic.ValidationError | AtomMemError)


def write_allowed(svc: ServicesDep, name: Annotated[str, Depends(tenant)]) -> Iterator[str]:
    """The tenant, once its write is within the per-minute limit. A write refused with a 4xx
    gives its place back, so only writes that happen use up the quota."""
    counter, wait = svc.keys.allow_write(name, svc.settings.api.writes_per_minute)
    if wait is not None:
        raise HTTPException(
            status.HTTP_429_TOO_MANY_REQUESTS,
            f"over {svc.settings.api.writes_per_minute} writes per minute for this tenant",
            headers={"Retry-After": str(max(1, int(wait + 0.999)))},
        )
    try:
        yield name
    except Exception as exc:
        if refused(exc):
            # A refund that fails (Redis blipped) costs the caller one write, never the
            # answer to its request.
            with contextlib.suppress(redis.RedisError):
                svc.keys.refund_write(counter)
        raise


Tenant = Annotated[str, Depends(tenant)]
WritingTenant = Annotated[str, Depends(write_allowed)]
Admin = Annotated[Caller, Depends(admin)]
