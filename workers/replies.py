"""Replies carry memory, so a stored reply lives only while its caller can still read it and
goes with any erasure of its space.

A producer stamps a reply task's payload with when it stops waiting (`reply_by`). A task
taken up after that does no work, and one that finishes after it (or within `MARGIN_S` of
it, so a reply never lands after the caller's clean-up) stores nothing. A stored reply
expires `GRACE_S` after its caller's deadline and is listed under its tenant with its space
until then; erasing in a space deletes every listed reply of the space. A reply with no
deadline keeps the backend's expiry.
"""

from __future__ import annotations

import math
import time
from typing import Any

import redis
from celery import Task
from celery.exceptions import Ignore

from common.store import keys

MARGIN_S = 0.5
GRACE_S = 30
ANY_SPACE = "*"  # replies not about one space (the list of spaces)
SEP = "\x1f"


def deadline(kwargs: dict[str, Any]) -> float | None:
    """When the caller gives up (epoch seconds), from the task payload's `reply_by`."""
    reply_by = (kwargs.get("payload") or {}).get("reply_by")
    return None if reply_by is None else float(reply_by)


def _gone(kwargs: dict[str, Any]) -> bool:
    due = deadline(kwargs)
    return due is not None and time.time() > due - MARGIN_S


def _redis(task: Task) -> redis.Redis | None:
    client = getattr(task.backend, "client", None)
    return client if isinstance(client, redis.Redis) else None


class ReplyTask(Task):  # type: ignore[misc]  # celery is untyped
    """A task whose result is read by a waiting caller, and only by it."""

    resultrepr_maxsize = 0  # the task-succeeded event (Flower) carries none of the reply

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if _gone(kwargs):
            raise Ignore()  # the caller is gone: no work, no reply
        result = super().__call__(*args, **kwargs)
        if _gone(kwargs):
            raise Ignore()  # the caller is gone: store nothing
        return result

    def on_success(self, retval: Any, task_id: str, args: Any, kwargs: Any) -> None:
        """The reply is stored: bound its life and list it under its space."""
        client = _redis(self)
        if client is None:
            return  # the in-process backend of the embedded mode ends with its process
        payload = kwargs.get("payload") or {}
        due = deadline(kwargs)
        now = time.time()
        pipe = client.pipeline()
        if due is not None:
            ttl = math.ceil(max(0.0, due - now)) + GRACE_S
            pipe.expire(self.backend.get_key_for_task(task_id), ttl)
        else:
            ttl = int(self.backend.expires or 24 * 3600)
        tenant = payload.get("tenant")
        if tenant:  # a reply about no tenant (the ping) holds no memory: nothing to erase
            listed = keys.replies(str(tenant))
            space = payload.get("space") or ANY_SPACE
            pipe.zadd(listed, {f"{space}{SEP}{task_id}": now + ttl})
            pipe.zremrangebyscore(listed, "-inf", now)
            pipe.expire(listed, ttl, nx=True)
            pipe.expire(listed, ttl, gt=True)
        pipe.execute()


def forget_space(task: Task, tenant: str, space: str) -> int:
    """Delete every stored reply about the space (and the tenant's lists of spaces);
    returns how many there were."""
    client = _redis(task)
    if client is None:
        return 0
    listed = keys.replies(tenant)
    members = [m.decode() if isinstance(m, bytes) else str(m) for m in client.zrange(listed, 0, -1)]
    gone = [m for m in members if m.split(SEP, 1)[0] in (space, ANY_SPACE)]
    if not gone:
        return 0
    pipe = client.pipeline()
    for member in gone:
        pipe.delete(task.backend.get_key_for_task(member.split(SEP, 1)[1]))
    pipe.zrem(listed, *gone)
    return sum(int(n) for n in pipe.execute()[:-1])
