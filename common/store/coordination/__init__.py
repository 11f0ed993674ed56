"""Coordination state by role: jobs, per-space sequence, parked chunks, locks, versions and
queue-wait samples.

Redis holds them when a broker is configured; otherwise a SQLite journal next to the store
does, so an interrupted embedded run finds its unfinished jobs again. Functions take the
roles they use; `Coordination` carries the whole set for callers that hand it on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import redis

from common.settings import Settings
from common.store.coordination.chunks import ChunkParking, RedisChunks, SqliteChunks
from common.store.coordination.jobs import JobStore, RedisJobs, SqliteJobs
from common.store.coordination.journal import Journal
from common.store.coordination.locks import RedisLocks, SpaceLocks, SqliteLocks
from common.store.coordination.sequence import RedisSequence, SpaceSequence, SqliteSequence
from common.store.coordination.versions import RedisVersions, SqliteVersions, VersionCounter
from common.store.coordination.waits import RedisWaits, SqliteWaits, WaitSamples

__all__ = [
    "ChunkParking",
    "Coordination",
    "JobStore",
    "SpaceLocks",
    "SpaceSequence",
    "VersionCounter",
    "WaitSamples",
]


@dataclass(frozen=True)
class Coordination:
    """Every role, on one backend (one Redis client or one SQLite journal)."""

    jobs: JobStore
    sequence: SpaceSequence
    chunks: ChunkParking
    locks: SpaceLocks
    versions: VersionCounter
    waits: WaitSamples
    _close: Callable[[], None] = field(repr=False, compare=False)

    @classmethod
    def redis(cls, url: str, job_ttl_s: int) -> Coordination:
        """Shared by every worker and producer; jobs and parked chunks expire after the TTL."""
        client = redis.Redis.from_url(url, decode_responses=True)
        return cls(
            jobs=RedisJobs(client, job_ttl_s),
            sequence=RedisSequence(client),
            chunks=RedisChunks(client, job_ttl_s),
            locks=RedisLocks(client),
            versions=RedisVersions(client),
            waits=RedisWaits(client),
            _close=client.close,
        )

    @classmethod
    def sqlite(cls, path: Path) -> Coordination:
        """The embedded default: one process, journaled to `path`."""
        journal = Journal(path)
        return cls(
            jobs=SqliteJobs(journal),
            sequence=SqliteSequence(journal),
            chunks=SqliteChunks(journal),
            locks=SqliteLocks(journal),
            versions=SqliteVersions(journal),
            waits=SqliteWaits(journal),
            _close=journal.close,
        )

    @classmethod
    def for_settings(cls, cfg: Settings) -> Coordination:
        """Redis when a broker is configured, else the SQLite journal."""
        if cfg.broker.url:
            return cls.redis(cfg.broker.url, cfg.pipeline.job_ttl_s)
        return cls.sqlite(cfg.pipeline.coordination_path)

    def close(self) -> None:
        self._close()
