"""Erased values off the disk: after an erasure, each Redis that held them (broker, jobs,
results) rewrites its append-only file, and saves a fresh snapshot when it keeps snapshots.

Deleting a key removes it from memory only: the AOF keeps every command that wrote it until a
rewrite replaces the file with the current dataset, and an RDB snapshot keeps it until the
next save. A rewrite already running forked before the erasure, so it is waited out (at most
`wait_s`) and a new one asked for.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable

import redis

log = logging.getLogger(__name__)


def rewrite_after_erasure(urls: Iterable[str], wait_s: float = 60.0) -> dict[str, str]:
    """Ask every distinct server among `urls` to rewrite its AOF (and snapshot, when it
    saves them); returns, per URL asked, what was done or why not."""
    done: dict[str, str] = {}
    seen: set[tuple[object, ...]] = set()
    for url in urls:
        client = redis.Redis.from_url(url, decode_responses=True)
        conn = client.connection_pool.connection_kwargs
        server = (conn.get("host"), conn.get("port"), conn.get("path"))
        try:
            if server in seen:
                continue  # databases of one server share its files
            seen.add(server)
            done[url] = _rewrite(client, wait_s)
        except redis.RedisError as exc:
            done[url] = f"failed: {exc}"
        finally:
            client.close()
        log.info("erasure: redis %s persistence: %s", server, done[url])
    return done


def _rewrite(client: redis.Redis, wait_s: float) -> str:
    asked = []
    if int(client.info("persistence").get("aof_enabled", 0)):
        _when_idle(client.bgrewriteaof, wait_s)
        asked.append("aof rewrite started")
    if _saves_snapshots(client):
        _when_idle(lambda: client.bgsave(schedule=True), wait_s)
        asked.append("snapshot scheduled")
    return ", ".join(asked) or "no persistence"


def _when_idle(ask: Callable[[], object], wait_s: float) -> None:
    """Ask now, or once the same job already running (forked before the erasure) is done."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            ask()
            return
        except redis.ResponseError as exc:
            if "already in progress" not in str(exc) or time.monotonic() > deadline:
                raise
        time.sleep(0.1)


def _saves_snapshots(client: redis.Redis) -> bool:
    """Whether snapshot save points are configured (CONFIG may be disabled: then assume so,
    and a scheduled save costs one snapshot)."""
    try:
        return bool(str(client.config_get("save").get("save", "")).strip())
    except redis.ResponseError:
        return True
