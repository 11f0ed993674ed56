"""Fair lanes: per-tenant queues of stage work; the tenant with the fewest steps running goes
next.

A Celery queue is first in, first out: one tenant's backlog of 60 sessions sits ahead of
another tenant's single session at every stage. In a fair lane each tenant's work waits in its
own list and a ring names the tenants with work waiting; the Celery queue carries
interchangeable tasks, at least one per entry, and whichever task a worker runs takes the
oldest entry of the waiting tenant with the fewest steps running (in any lane; the longest
waiting among equals), so each tenant gets an equal share of the worker slots. Queue lengths
still count the work to do (autoscaling and Flower read them).

Tasks must never be fewer than entries, or work would wait for a task that never comes. So an
entry has a key and work offered again while it waits is not queued twice, yet every offer
sends its task (a surplus task finds nothing and returns): a producer redelivered after dying
between queueing and sending restores the balance. A task records what it took under its own
id until it finishes, so a task redelivered after its worker died takes the same entry again;
an entry held past the lease (its task is gone for good) goes back to the front of its
tenant's lane, and the task that put it back sends a new task for it. An entry may therefore
run twice: every stage is idempotent.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import redis

from common.store import keys

# The per-tenant keys are only known inside the script (the ring names the tenant), so it
# builds them from the parts of the templates in `keys`: a single Redis, not a cluster. A tenant
# is in the ring exactly while its entries hash is not empty.
_OFFER = """
local offered = 0
for i = 2, #ARGV, 2 do
  if redis.call('hsetnx', KEYS[3], ARGV[i], ARGV[i + 1]) == 1 then
    redis.call('rpush', KEYS[2], ARGV[i])
    if redis.call('hlen', KEYS[3]) == 1 then redis.call('rpush', KEYS[1], ARGV[1]) end
    offered = offered + 1
  end
end
return offered
"""

# KEYS: ring, claims, claim times, running. ARGV: task id, now, stale before, how many tenants
# of the ring to look at, then the queue and the entries templates cut where the tenant goes.
_CLAIM = """
local function queue(tenant) return ARGV[5] .. tenant .. ARGV[6] end
local function entries(tenant) return ARGV[7] .. tenant .. ARGV[8] end
local function stopped(tenant)
  if redis.call('hincrby', KEYS[4], tenant, -1) <= 0 then redis.call('hdel', KEYS[4], tenant) end
end
local requeued = 0
for _, task in ipairs(redis.call('zrangebyscore', KEYS[3], '-inf', ARGV[3])) do
  if task ~= ARGV[1] then
    local raw = redis.call('hget', KEYS[2], task)
    if raw then
      local held = cjson.decode(raw)
      local tenant = held[1]
      stopped(tenant)
      if redis.call('hsetnx', entries(tenant), held[2], held[3]) == 1 then
        redis.call('lpush', queue(tenant), held[2])
        if redis.call('hlen', entries(tenant)) == 1 then redis.call('rpush', KEYS[1], tenant) end
        requeued = requeued + 1
      end
    end
    redis.call('hdel', KEYS[2], task)
    redis.call('zrem', KEYS[3], task)
  end
end
local held = redis.call('hget', KEYS[2], ARGV[1])
if held then
  redis.call('zadd', KEYS[3], ARGV[2], ARGV[1])
  return {held, requeued}
end
while true do
  local tenant, fewest = nil, nil
  for _, candidate in ipairs(redis.call('lrange', KEYS[1], 0, tonumber(ARGV[4]) - 1)) do
    local running = tonumber(redis.call('hget', KEYS[4], candidate) or '0')
    if fewest == nil or running < fewest then tenant, fewest = candidate, running end
    if running == 0 then break end
  end
  if not tenant then return {false, requeued} end
  redis.call('lrem', KEYS[1], 1, tenant)
  local key = redis.call('lpop', queue(tenant))
  if key then
    local entry = redis.call('hget', entries(tenant), key)
    redis.call('hdel', entries(tenant), key)
    if redis.call('hlen', entries(tenant)) > 0 then redis.call('rpush', KEYS[1], tenant) end
    local raw = cjson.encode({tenant, key, entry})
    redis.call('hset', KEYS[2], ARGV[1], raw)
    redis.call('zadd', KEYS[3], ARGV[2], ARGV[1])
    redis.call('hincrby', KEYS[4], tenant, 1)
    return {raw, requeued}
  end
end
"""

_RELEASE = """
local raw = redis.call('hget', KEYS[1], ARGV[1])
if raw then
  local tenant = cjson.decode(raw)[1]
  if redis.call('hincrby', KEYS[3], tenant, -1) <= 0 then redis.call('hdel', KEYS[3], tenant) end
  redis.call('hdel', KEYS[1], ARGV[1])
end
redis.call('zrem', KEYS[2], ARGV[1])
"""

LOOK_AHEAD = 64  # tenants of the ring a take compares (bounds its cost with many tenants)


@dataclass(frozen=True)
class Claim:
    tenant: str
    key: str
    entry: str


@dataclass(frozen=True)
class Turn:
    """What a task took (None: nothing waits) and how many entries of vanished tasks it put
    back, each of which needs a new task."""

    claim: Claim | None
    requeued: int = 0


class FairLanes(Protocol):
    def offer(self, lane: str, tenant: str, items: Sequence[tuple[str, str]]) -> int:
        """Queue (key, entry) items behind the tenant's others, skipping a key that already
        waits; returns how many were queued. Send one task per item offered, queued or not."""
        ...

    def claim(self, lane: str, task_id: str, now: float, stale_before: float) -> Turn:
        """The entry `task_id` already holds, else the oldest entry of the waiting tenant with
        the fewest steps running (the longest waiting among equals); first puts back the
        entries of tasks that took theirs before `stale_before`."""
        ...

    def release(self, lane: str, task_id: str) -> None:
        """The task is finished with its entry."""
        ...

    def waiting(self, lane: str, tenant: str) -> int: ...


def _parts(template: str) -> list[str]:
    """A key template cut where its tenant ("\\0") goes."""
    return template.split("\0")


class RedisFair:
    """Lanes as Redis lists, moved by Lua scripts so a take is atomic across workers."""

    def __init__(self, client: redis.Redis) -> None:
        self._r = client
        self._offer = client.register_script(_OFFER)
        self._claim = client.register_script(_CLAIM)
        self._release = client.register_script(_RELEASE)

    def offer(self, lane: str, tenant: str, items: Sequence[tuple[str, str]]) -> int:
        if not items:
            return 0
        names = [
            keys.fair_ring(lane),
            keys.fair_queue(tenant, lane),
            keys.fair_entries(tenant, lane),
        ]
        args = [tenant, *(part for item in items for part in item)]
        return int(self._offer(keys=names, args=args))

    def claim(self, lane: str, task_id: str, now: float, stale_before: float) -> Turn:
        raw, requeued = self._claim(
            keys=[
                keys.fair_ring(lane),
                keys.fair_claims(lane),
                keys.fair_claimed_at(lane),
                keys.FAIR_RUNNING,
            ],
            args=[
                task_id,
                now,
                stale_before,
                LOOK_AHEAD,
                *_parts(keys.fair_queue("\0", lane)),
                *_parts(keys.fair_entries("\0", lane)),
            ],
        )
        if raw is None:
            return Turn(None, int(requeued))
        tenant, key, entry = json.loads(raw)
        return Turn(Claim(str(tenant), str(key), str(entry)), int(requeued))

    def release(self, lane: str, task_id: str) -> None:
        names = [keys.fair_claims(lane), keys.fair_claimed_at(lane), keys.FAIR_RUNNING]
        self._release(keys=names, args=[task_id])

    def running(self, tenant: str) -> int:
        return int(self._r.hget(keys.FAIR_RUNNING, tenant) or 0)

    def waiting(self, lane: str, tenant: str) -> int:
        return int(self._r.hlen(keys.fair_entries(tenant, lane)))
