"""GET /metrics: the API's Prometheus metrics (requests by route template, queue and lane
depths read from Redis at scrape time), on the admin key, and the middleware that counts the
requests.

The admin key, because the exposition names what every tenant shares (queue depths, and in
multiprocess mode whatever the processes of this host record): Prometheus sends it as
`authorization: {credentials: <admin key>}` in its scrape config (docs/operations.md,
"Metrics"). It is not part of the JSON API, so not in the OpenAPI spec.
"""

from __future__ import annotations

import time

from fastapi import APIRouter, FastAPI, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.deps import Admin
from common.observability import metrics
from common.settings import Settings
from common.store.coordination.depths import QueueDepths

router = APIRouter(tags=["metrics"])
UNMATCHED = "unmatched"  # a path no route serves: never the raw path (one series per probe)


@router.get("/metrics", include_in_schema=False)
def prometheus(request: Request, _: Admin) -> Response:
    served: CollectorRegistry = request.app.state.prometheus
    return Response(generate_latest(served), media_type=CONTENT_TYPE_LATEST)


def install(app: FastAPI, settings: Settings) -> None:
    """Serve /metrics and count every request (one registry per app, built now; its Redis
    client on the first scrape)."""
    collectors = [] if settings.broker.url is None else [QueueDepths(settings.broker.url)]
    app.state.prometheus = metrics.registry(*collectors)
    app.include_router(router)
    app.add_middleware(RequestMetrics)


def template(scope: Scope) -> str:
    """The route's path template (`/v1/spaces/{space}/search`), as the router matched it."""
    route = scope.get("route")
    path = getattr(route, "path", None) if isinstance(route, BaseRoute) else None
    return str(path) if path else UNMATCHED


class RequestMetrics:
    """Counts and times each HTTP request by route template, method and status (plain ASGI:
    streamed replies, the MCP transport's among them, pass through untouched)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500  # an exception before the reply started is answered as a 500
        started = time.perf_counter()

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            labels = (template(scope), scope["method"], str(status))
            metrics.HTTP_REQUESTS.labels(*labels).inc()
            metrics.HTTP_DURATION.labels(*labels).observe(time.perf_counter() - started)
