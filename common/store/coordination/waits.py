"""Queue-wait samples: how long each task sat in its queue, for the benchmark's medians."""

from __future__ import annotations

from typing import Protocol

import redis

from common.store import keys
from common.store.coordination.journal import Journal

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


class SqliteWaits:
    def __init__(self, journal: Journal) -> None:
        self._j = journal
        journal.create("CREATE TABLE IF NOT EXISTS waits (queue TEXT, seconds REAL)")

    def record_wait(self, queue: str, seconds: float) -> None:
        self._j.run("INSERT INTO waits VALUES (?, ?)", queue, seconds)

    def waits(self, queue: str) -> list[float]:
        return [float(r[0]) for r in self._j.rows("SELECT seconds FROM waits WHERE queue=?", queue)]
