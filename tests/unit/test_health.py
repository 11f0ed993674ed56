"""The API's probes answer from the event loop: while every request thread is blocked, and
without a worker or a queue behind them."""

from __future__ import annotations

import asyncio

from tests.helpers.probes import api, while_threads_are_busy
from tests.helpers.redis import unreachable_url


def test_healthz_answers_while_every_request_thread_is_busy() -> None:
    app = api(unreachable_url())
    reply = asyncio.run(while_threads_are_busy(app, "/healthz"))
    assert reply is not None, "/healthz waited for a request thread"
    assert reply.status_code == 200 and reply.json() == {"status": "ok"}


def test_readyz_answers_not_ready_while_every_thread_is_busy_and_redis_is_down() -> None:
    app = api(unreachable_url())  # nothing listens there
    reply = asyncio.run(while_threads_are_busy(app, "/readyz"))
    assert reply is not None, "/readyz waited for a request thread"
    assert reply.status_code == 503
    body = reply.json()
    assert body["status"] == "not ready" and body["redis"] is False
    assert "ConnectionError" in body["redis_error"]
    assert "worker" not in body, "readiness never reaches for a worker"
