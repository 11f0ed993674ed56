"""Queue and lane depths, read from Redis when Prometheus scrapes: the Celery queues' lists
(every priority step of each) and the fair lanes' waiting steps, summed over tenants.

Beside the lanes' own layout (fair.py) rather than with the metrics it feeds, which the
coordination's job store records into: the kernel's packages import one way only.
"""

from __future__ import annotations

from collections.abc import Iterable

import redis
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from redis.backoff import NoBackoff
from redis.retry import Retry

from common.queues import Queue
from common.store import keys

LANES = (Queue.EXTRACT, Queue.MEMORY)  # the fair lanes, named after the queues that run them
# kombu's Redis transport keeps one list per priority step (its default steps): "<queue>" for
# step 0, then "<queue>\x06\x16<step>"; a queue's depth is all of them.
PRIORITY_STEPS = (0, 3, 6, 9)
_PRIORITY_SEP = "\x06\x16"


def queue_lists(queue: str) -> list[str]:
    """The Redis lists a queue's messages wait in, one per priority step."""
    return [queue if step == 0 else f"{queue}{_PRIORITY_SEP}{step}" for step in PRIORITY_STEPS]


class QueueDepths(Collector):
    """Queue and lane depths read from Redis at scrape time: a few commands in two round
    trips, with a short timeout. A Redis that is away makes it yield nothing, so the rest of
    the scrape still answers (the gap shows as the series' absence)."""

    def __init__(self, url: str, timeout_s: float = 0.5) -> None:
        self._url = url
        self._timeout_s = timeout_s
        self._client: redis.Redis | None = None

    def _redis(self) -> redis.Redis:
        if self._client is None:  # built on the first scrape, never at import or before a fork
            self._client = redis.Redis.from_url(
                self._url,
                socket_timeout=self._timeout_s,
                socket_connect_timeout=self._timeout_s,
                retry=Retry(NoBackoff(), 0),  # one try: the next scrape is the retry
                decode_responses=True,
            )
        return self._client

    def collect(self) -> Iterable[Metric]:
        try:
            queues, lanes, tenants = self.read()
        except (redis.RedisError, OSError):
            return []
        queue_depth = GaugeMetricFamily(
            "atommem_queue_depth", "Messages waiting in each Celery queue", labels=["queue"]
        )
        for name, n in queues.items():
            queue_depth.add_metric([name], n)
        lane_depth = GaugeMetricFamily(
            "atommem_lane_depth",
            "Steps waiting in a stage's fair lanes, every tenant's together",
            labels=["lane"],
        )
        lane_tenants = GaugeMetricFamily(
            "atommem_lane_tenants", "Tenants with steps waiting in a fair lane", labels=["lane"]
        )
        for lane, n in lanes.items():
            lane_depth.add_metric([lane], n)
            lane_tenants.add_metric([lane], tenants[lane])
        return [queue_depth, lane_depth, lane_tenants]

    def read(self) -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
        """(messages per queue, steps per lane, tenants waiting per lane)."""
        client = self._redis()
        pipe = client.pipeline(transaction=False)
        for queue in Queue:
            for name in queue_lists(queue.value):
                pipe.llen(name)
        for lane in LANES:
            pipe.lrange(keys.fair_ring(lane.value), 0, -1)
        found = pipe.execute()
        steps = len(PRIORITY_STEPS)
        queues = {q.value: sum(found[i * steps : (i + 1) * steps]) for i, q in enumerate(Queue)}
        rings: list[list[str]] = found[len(Queue) * steps :]
        # A tenant is in a lane's ring exactly while its entries hash is not empty (fair.py);
        # the hash's length is what waits (the list may hold keys taken back meanwhile).
        pipe = client.pipeline(transaction=False)
        for lane, ring in zip(LANES, rings, strict=True):
            for tenant in ring:
                pipe.hlen(keys.fair_entries(tenant, lane.value))
        lengths: list[int] = pipe.execute() if any(rings) else []
        lanes: dict[str, int] = {}
        tenants: dict[str, int] = {}
        at = 0
        for lane, ring in zip(LANES, rings, strict=True):
            lanes[lane.value] = sum(lengths[at : at + len(ring)])
            tenants[lane.value] = len(ring)
            at += len(ring)
        return queues, lanes, tenants

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
