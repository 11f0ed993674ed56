"""Queue-wait samples: how long each task sat in its queue, for the benchmark's medians."""

from __future__ import annotations

import threading
from collections import deque
from typing import Protocol

import redis

from common.store import keys

WAIT_SAMPLES = 20_000


class WaitSamples(Protocol):
    def record_wait(self, queue: str, seconds: float) -> None: ...
    def waits(self, queue: str) -> list[float]: ...


class RedisWaits:
    """The latest WAIT_SAMPLES samples per queue, newest first."""

    def __init__(self, client: redis.Redis) -> None:
        self._r = client

    def record_wait(self, queue: str, seconds: float) -> None:
        pipe = self._r.pipeline()
        pipe.lpush(keys.queue_wait(queue), f"{seconds:.6f}")
        pipe.ltrim(keys.queue_wait(queue), 0, WAIT_SAMPLES - 1)
        pipe.execute()

    def waits(self, queue: str) -> list[float]:
        return [float(v) for v in self._r.lrange(keys.queue_wait(queue), 0, -1)]


class LocalWaits:
    """The embedded mode's samples: in this process, the latest WAIT_SAMPLES per queue. (They
    were rows of the journal, one transaction each, and never trimmed: a long-lived embedded
    process paid a synced write per task for a table that only grew.)"""

    def __init__(self, limit: int = WAIT_SAMPLES) -> None:
        self._limit = limit
        self._lock = threading.Lock()
        self._samples: dict[str, deque[float]] = {}

    def record_wait(self, queue: str, seconds: float) -> None:
        with self._lock:
            kept = self._samples.setdefault(queue, deque(maxlen=self._limit))
            kept.appendleft(seconds)

    def waits(self, queue: str) -> list[float]:
        with self._lock:
            return list(self._samples.get(queue, ()))
