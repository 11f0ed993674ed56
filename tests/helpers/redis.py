"""The shared Redis on 127.0.0.1:6379: the one table of which database each test module owns, a
client that skips where no Redis answers, and what a test reads or cleans up there."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import cast

import redis

from common.store import keys
from tests.helpers.ports import free_port
from tests.helpers.skips import unavailable

SHARED = ("127.0.0.1", 6379)

# Each module on the shared Redis owns a database: two modules may run at once (two tiers in two
# terminals), and a module flushes or scans its database as if it were alone. A module that
# needs a second database names it `module:role`. DB 0 is left to the developer (a local stack
# uses it). Modules that must stop or kill Redis start their own (tests/helpers/redis_server.py).
# tests/unit/test_suite_layout.py fails on a number given twice, or written anywhere else.
DATABASES: dict[str, int] = {
    "tests.unit.test_producer": 1,
    "tests.unit.test_erase_in_flight": 2,
    "tests.integration.test_model_budgets": 3,
    "tests.e2e.test_odd_input": 4,
    "tests.e2e.test_sdk": 5,
    "tests.integration.test_questions_beside_writes": 6,
    "tests.browser.shoot": 7,
    "tests.browser.test_inspector:no-workers": 8,
    "tests.unit.test_model_budget": 9,
    "tests.integration.test_pending_reads": 10,
    "tests.integration.test_workers": 11,
    "tests.e2e.test_api": 12,
    "tests.unit.test_coordination": 13,
    "tests.e2e.test_mcp_http": 14,
    "tests.browser.test_inspector": 15,
}


def shared_url(owner: str) -> str:
    """The URL of `owner`'s database on the shared Redis (`owner`: a module's `__name__`, or
    `module:role`)."""
    if owner not in DATABASES:
        raise LookupError(f"{owner} owns no database: give it one in {__name__}.DATABASES")
    host, port = SHARED
    return f"redis://{host}:{port}/{DATABASES[owner]}"


def unreachable_url() -> str:
    """A Redis URL on a loopback port nothing listens on: for an app that must not need one."""
    return f"redis://127.0.0.1:{free_port()}/0"


def redis_or_skip(url: str, decode_responses: bool = False) -> redis.Redis:
    """A client of the Redis at `url`; where none answers the test skips (fails under CI)."""
    client = redis.Redis.from_url(url, decode_responses=decode_responses)
    try:
        client.ping()
    except redis.ConnectionError:
        client.close()
        unavailable(f"Redis is not running at {url.rsplit('/', 1)[0]}")
    return client


@contextmanager
def flushed(url: str, decode_responses: bool = False) -> Iterator[redis.Redis]:
    """`redis_or_skip(url)` with its database emptied before and after."""
    client = redis_or_skip(url, decode_responses)
    client.flushdb()
    try:
        yield client
    finally:
        client.flushdb()
        client.close()


def redis_text(client: redis.Redis) -> str:
    """Every key of the client's database with its value, as one text (a line a key): what
    a test searches for text that must not be left anywhere."""
    out = []
    for key in client.scan_iter(count=500):
        kind = client.type(key)
        value: object = kind
        if kind == "string":
            value = client.get(key)
        elif kind == "hash":
            value = client.hgetall(key)
        elif kind == "list":
            value = client.lrange(key, 0, -1)
        elif kind == "set":
            value = sorted(client.smembers(key))
        elif kind == "zset":
            value = client.zrange(key, 0, -1)
        out.append(f"{key} {value}")
    return "\n".join(out)


def forget_tenant(client: redis.Redis, tenant: str) -> None:
    """Delete a test tenant's keys (and its queues' samples), leaving every other key: the
    cleanup of a module whose tests share a database unflushed, a tenant each (`client`
    decodes)."""
    for pattern in (f"atommem:*:{tenant}:*", keys.queue_wait(f"{tenant}-*")):
        for key in client.scan_iter(pattern):
            client.delete(key)
    client.delete(keys.recent_jobs(tenant), keys.recent_jobs(f"{tenant}-other"))
    for member in client.smembers(keys.OPEN_JOBS):
        if str(member).startswith(f"{tenant}\x1f"):
            client.srem(keys.OPEN_JOBS, member)
    for job in cast(list[str], client.zrange(keys.JOB_PROGRESS, 0, -1)):
        if str(job).startswith(f"{tenant}\x1f"):
            client.zrem(keys.JOB_PROGRESS, job)
            client.hdel(keys.JOB_RESENDS, job)
