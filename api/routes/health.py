"""Liveness and readiness."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from api.deps import ServicesDep
from common.models.responses import Health, Readiness

router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz() -> Health:
    """The process answers."""
    return Health(status="ok")


@router.get(
    "/readyz",
    response_model=Readiness,
    response_model_exclude_none=True,
    responses={503: {"model": Readiness, "description": "Not ready (the same body)"}},
)
def readyz(svc: ServicesDep) -> Readiness | JSONResponse:
    """Redis answers, a worker answers on the query queue, and that worker reaches Qdrant."""
    checks: dict[str, Any] = {}
    try:
        checks["redis"] = bool(svc.redis.ping())
    except Exception as exc:  # readiness reports, it never raises
        checks["redis"] = False
        checks["redis_error"] = f"{type(exc).__name__}: {exc}"
    if checks["redis"]:
        try:
            reply = svc.client.ping(timeout=svc.settings.api.ping_timeout_s)
            checks["worker"] = bool(reply.get("worker"))
            checks["store"] = bool(reply.get("store"))
            if reply.get("reason"):
                checks["store_error"] = reply["reason"]
        except Exception as exc:  # no worker within the timeout
            checks["worker"] = checks["store"] = False
            checks["worker_error"] = f"{type(exc).__name__}: {exc}"
    ready = all(checks.get(k) for k in ("redis", "worker", "store"))
    body = Readiness.model_validate({"status": "ready" if ready else "not ready", **checks})
    if ready:
        return body
    return JSONResponse(body.model_dump(mode="json", exclude_none=True), status_code=503)
