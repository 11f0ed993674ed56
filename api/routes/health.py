"""Liveness and readiness of this API process, and a deeper check of the worker path.

Both probes are `async def` and run on the event loop, so they answer while every request
thread is busy with a slow query; neither goes through a task queue, so a queue backlog never
takes API pods out of the Service. Readiness fails while this process's slots for requests
waiting on workers are all taken (`api.capacity`): it would refuse them with 503.
"""

from __future__ import annotations

import asyncio
from typing import Annotated

import redis.asyncio as aioredis
from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse

from api.deps import Services
from common.models.responses import Health, Readiness

# Below the readiness probe's timeoutSeconds (infra/k8s/api.yaml), so the probe gets an answer.
REDIS_TIMEOUT_S = 1.0

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz() -> Health:
    """The process answers (no I/O)."""
    return Health(status="ok")


@router.get(
    "/readyz",
    response_model=Readiness,
    response_model_exclude_none=True,
    responses={503: {"model": Readiness, "description": "Not ready (the same body)"}},
)
async def readyz(
    request: Request,
    deep: Annotated[
        bool,
        Query(
            description="also send a ping through the query queue: a worker answers and "
            "reaches the store (waits up to api.ping_timeout_s; a diagnostic, not a probe)"
        ),
    ] = False,
) -> Readiness | JSONResponse:
    """Ready when Redis, which every route needs (where the API sends work to the queues),
    answers PING on a new connection, and a slot
    is free for a request that waits on a worker: a process whose `api.wait_slots` are all
    taken refuses searches with 503, so the Service should send them elsewhere."""
    # The Services come from app.state here, not the ServicesDep dependency: a sync
    # dependency runs in the thread pool, which is what this route must not wait for.
    svc: Services = request.app.state.services
    checks: dict[str, bool | str] = {}
    if svc.settings.broker.url:  # `atommem serve` has no Redis: its worker is this process
        try:
            await _redis_answers(svc.settings.broker.url)
            checks["redis"] = True
        except Exception as exc:  # readiness reports, it never raises
            checks["redis"] = False
            checks["redis_error"] = _describe(exc)
    slots = svc.slots
    checks["waiting"] = not slots.full
    if slots.full:
        checks["waiting_error"] = (
            f"saturated: {slots.taken} requests wait on workers, the most api.wait_slots "
            f"({slots.size}) allows"
        )
    if deep and checks.get("redis", True):
        checks |= await _worker_round_trip(svc)
    ready = all(checks.get(k, True) for k in ("redis", "worker", "store", "waiting"))
    body = Readiness.model_validate({"status": "ready" if ready else "not ready", **checks})
    if ready:
        return body
    return JSONResponse(body.model_dump(mode="json", exclude_none=True), status_code=503)


async def _redis_answers(url: str) -> None:
    """PING on a connection of its own: the check covers name resolution and connecting, and
    never waits behind the shared pool's connections."""
    client = aioredis.Redis.from_url(
        url, socket_timeout=REDIS_TIMEOUT_S, socket_connect_timeout=REDIS_TIMEOUT_S
    )
    try:
        async with asyncio.timeout(REDIS_TIMEOUT_S):
            await client.ping()  # an error reply (LOADING, NOAUTH) raises
    finally:
        await client.aclose()


async def _worker_round_trip(svc: Services) -> dict[str, bool | str]:
    """A ping task through the query queue, in a thread outside the request pool."""
    try:
        reply = await asyncio.to_thread(svc.producer.ping, svc.settings.api.ping_timeout_s)
    except Exception as exc:  # no worker within the timeout
        return {"worker": False, "store": False, "worker_error": _describe(exc)}
    checks: dict[str, bool | str] = {"worker": reply.worker, "store": reply.store}
    if reply.reason:
        checks["store_error"] = reply.reason
    return checks


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
