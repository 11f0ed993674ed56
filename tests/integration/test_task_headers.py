"""Task messages name ids in their headers, never a session's turns: the headers are what
Flower and the workers' task events show, and those must not outlive an erasure."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import celery.exceptions
import pytest
from celery import Celery

from common.celery_config import celery_config
from common.models.session import SessionInput, Turn
from common.producer import Producer
from common.settings import BrokerSettings, Settings
from common.store.coordination.roles import Coordination
from tests.helpers.redis_server import start_redis

SECRET = "Ann's passport number is 9981-XK"


def test_a_submitted_session_shows_ids_only_in_its_message_headers(tmp_path: Path) -> None:
    server = start_redis(tmp_path / "redis", appendonly=False)
    try:
        settings = Settings(broker=BrokerSettings(url=server.url()))
        app = Celery("headers-test")
        app.conf.update(celery_config(settings))
        coord = Coordination.redis(server.url(), 3600)
        session = SessionInput(
            session_id="s-9",
            started_at=datetime(2024, 3, 1, 10),
            participants=["Ann"],
            turns=[Turn(speaker="Ann", text=SECRET)],
        )
        client = Producer(app, coord.jobs, coord.sequence)
        client.submit("acme", "home", [session])
        with pytest.raises(celery.exceptions.TimeoutError):
            client.search("acme", "home", f"what is {SECRET}?", timeout=0.2)
        redis = server.client()
        # each priority of a queue waits in a list of its own ("query", "query\x06\x169")
        lists = [key for q in ("ingest", "query") for key in sorted(redis.scan_iter(match=f"{q}*"))]
        queued = [json.loads(m) for key in lists for m in redis.lrange(key, 0, -1)]
        assert len(queued) == 2, "no worker runs: both tasks wait in their queues"
        for message in queued:
            headers = json.dumps(message["headers"])
            assert "passport" not in headers and "9981" not in headers
            assert "home" in message["headers"]["kwargsrepr"]
        assert "s-9" in queued[0]["headers"]["kwargsrepr"]
        coord.close()
    finally:
        server.stop()
