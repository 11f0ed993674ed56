"""Liveness and readiness."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from api.deps import ServicesDep

router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz() -> dict[str, str]:
    """The process answers."""
    return {"status": "ok"}


@router.get("/readyz", response_model=None)
def readyz(svc: ServicesDep) -> dict[str, Any] | JSONResponse:
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
    body = {"status": "ready" if ready else "not ready", **checks}
    return body if ready else JSONResponse(body, status_code=503)
