"""The scrape-time collector of queue and lane depths against a private Redis: every priority
list of a queue counted, each lane's steps summed over tenants, and a Redis that is away
leaves the scrape answering without them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from common.queues import Queue
from common.store.coordination.depths import QueueDepths, queue_lists
from common.store.coordination.fair import RedisFair
from tests.helpers.redis_server import RedisServer, start_redis

pytestmark = pytest.mark.integration


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    running = start_redis(tmp_path / "redis", appendonly=False)
    yield running
    running.stop()


def scraped(collector: QueueDepths) -> dict[str, dict[str, float]]:
    """What a scrape of a registry holding only the collector shows: metric → label → value."""
    served = CollectorRegistry()
    served.register(collector)
    out: dict[str, dict[str, float]] = {}
    for family in text_string_to_metric_families(generate_latest(served).decode()):
        for sample in family.samples:
            (label,) = sample.labels.values()
            out.setdefault(sample.name, {})[label] = sample.value
    return out


def test_depths_count_every_priority_list_and_every_tenants_lane(server: RedisServer) -> None:
    client = server.client()
    lists = queue_lists("query")
    assert lists == ["query", "query\x06\x163", "query\x06\x166", "query\x06\x169"]
    for n, name in enumerate(lists, start=1):
        client.rpush(name, *[f"m{i}" for i in range(n)])  # 1 + 2 + 3 + 4 messages
    client.rpush("extract\x06\x169", "m")
    fair = RedisFair(client)
    fair.offer("extract", "acme", [("c1", "{}"), ("c2", "{}"), ("c3", "{}")])
    fair.offer("extract", "globex", [("c1", "{}")])
    fair.offer("extract", "acme", [("c1", "{}")])  # already waiting: not queued twice
    fair.offer("memory", "acme", [("s1", "{}")])
    fair.claim("memory", "task-1", now=0.0, stale_before=-1.0)  # taken: no longer waiting

    found = scraped(QueueDepths(server.url()))
    assert found["atommem_queue_depth"] == {
        "ingest": 0,
        "extract": 1,
        "memory": 0,
        "profile": 0,
        "query": 10,
    }
    assert found["atommem_lane_depth"] == {"extract": 4, "memory": 0}
    assert found["atommem_lane_tenants"] == {"extract": 2, "memory": 0}
    assert set(found["atommem_queue_depth"]) == {q.value for q in Queue}
    client.close()


def test_a_redis_that_is_away_yields_nothing(server: RedisServer) -> None:
    collector = QueueDepths(server.url(), timeout_s=0.2)
    assert "atommem_queue_depth" in scraped(collector)
    server.stop()
    assert scraped(collector) == {}  # the scrape still answers, without these series
    with pytest.raises(redis.ConnectionError):
        collector.read()
    collector.close()
