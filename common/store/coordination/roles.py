"""The coordination roles as one set (`Coordination`), built for Redis or the SQLite journal."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import redis

from common.settings import Settings
from common.store.coordination.chunks import ChunkParking, RedisChunks, SqliteChunks
from common.store.coordination.fair import FairLanes, RedisFair
from common.store.coordination.jobs import JobStore, RedisJobs, SqliteJobs
from common.store.coordination.journal import Journal
from common.store.coordination.locks import RedisLocks, SpaceLocks, SqliteLocks
from common.store.coordination.sequence import RedisSequence, SpaceSequence, SqliteSequence
from common.store.coordination.versions import RedisVersions, SqliteVersions, VersionCounter
from common.store.coordination.waits import LocalWaits, RedisWaits, WaitSamples


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
    fair: FairLanes | None = None  # Redis only: the embedded process sends work straight on
    # After an erasure: leave no deleted bytes in the backend's files (the SQLite journal's
    # log; Redis's files are rewritten by `common.store.persistence`).
    scrub: Callable[[], None] = field(default=lambda: None, repr=False, compare=False)

    @classmethod
    def redis(cls, url: str, job_ttl_s: int, max_hold_s: float = 3600.0) -> Coordination:
        """Shared by every worker and producer; jobs and parked chunks expire after the TTL.
        A lock taken here is renewed while held, for at most `max_hold_s`."""
        client = redis.Redis.from_url(url, decode_responses=True)
        locks = RedisLocks(client, max_hold_s)

        def close() -> None:
            locks.close()
            client.close()

        return cls(
            jobs=RedisJobs(client, job_ttl_s),
            sequence=RedisSequence(client),
            chunks=RedisChunks(client, job_ttl_s),
            locks=locks,
            versions=RedisVersions(client),
            waits=RedisWaits(client),
            _close=close,
            fair=RedisFair(client),
        )

    @classmethod
    def sqlite(cls, path: Path, max_hold_s: float = 3600.0) -> Coordination:
        """The embedded default: one process, journaled to `path`."""
        journal = Journal(path)
        journal.run("DROP TABLE IF EXISTS waits")  # samples a journal kept before LocalWaits
        locks = SqliteLocks(journal, max_hold_s)

        def close() -> None:
            locks.close()
            journal.close()

        return cls(
            jobs=SqliteJobs(journal),
            sequence=SqliteSequence(journal),
            chunks=SqliteChunks(journal),
            locks=locks,
            versions=SqliteVersions(journal),
            waits=LocalWaits(),
            _close=close,
            scrub=journal.scrub,
        )

    @classmethod
    def for_settings(cls, cfg: Settings) -> Coordination:
        """Redis when a broker is configured, else the SQLite journal."""
        max_hold_s = float(cfg.broker.time_limit)
        if cfg.broker.url:
            return cls.redis(cfg.broker.url, cfg.pipeline.job_ttl_s, max_hold_s)
        return cls.sqlite(cfg.pipeline.coordination_path, max_hold_s)

    def close(self) -> None:
        self._close()
