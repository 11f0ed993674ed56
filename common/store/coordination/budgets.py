"""Model budgets: per endpoint, a request bucket, a token bucket and a cap on calls in flight,
shared by every process through Redis (Lua, so a take is atomic) or kept in this process.

Both buckets save nothing up: a bucket's level is at most 0, a call may start when neither
bucket is in debt, and it then takes 1 request and its token estimate, going into debt that
refills at `limit / period_s` per second. So calls are paced at the budget's rate and any
window of one period sees at most `rpm` requests (and `tpm` tokens, plus one call's worth):
a provider's per-minute limit is never crossed by a burst. A call settles its tokens when it
ends (the estimate back, the real usage taken). Each call in flight holds a lease that lapses
`lease_s` after it started, so a process that dies mid-call gives its place back. A 429 holds
every process off the endpoint until its `Retry-After`. A limit of 0 lets nothing through.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol, cast

import redis

from common.store import keys

# Debt below this is rounding, not debt.
EPSILON = 1e-9
# With every lease taken, a waiting call looks again this often (or when the first lapses).
POLL_S = 0.1
COUNTERS = ("calls", "tokens", "throttled", "waits", "wait_ms", "requeues")


@dataclass(frozen=True)
class Limits:
    """An endpoint's budget; None is unlimited, 0 lets nothing through."""

    rpm: int | None = None
    tpm: int | None = None
    max_concurrent: int | None = None
    period_s: float = 60.0
    lease_s: float = 130.0

    @property
    def never(self) -> bool:
        """A zero budget: no call ever goes."""
        return 0 in (self.rpm, self.tpm, self.max_concurrent)


class ModelBudgets(Protocol):
    def take(self, endpoint: str, limits: Limits, tokens: int, lease: str, now: float) -> float:
        """Start a call of `tokens` estimated tokens under `lease`: 0.0 when it may go now,
        else the seconds until it might (math.inf: never, a zero budget)."""
        ...

    def settle(self, endpoint: str, limits: Limits, lease: str, refund: int, now: float) -> None:
        """The call under `lease` ended: give back `refund` tokens (negative: take more) and
        its lease."""
        ...

    def hold_off(self, endpoint: str, until: float) -> None:
        """The server answered 429: no call to the endpoint starts before `until`."""
        ...

    def failing(self, endpoint: str, now: float, gap_s: float) -> float:
        """A call to the endpoint failed transiently: since when it has been failing (the
        first such failure after its last success, or after `gap_s` with no failure)."""
        ...

    def recovered(self, endpoint: str) -> None:
        """A call to the endpoint went through: its failing spell, if any, is over."""
        ...

    def count(self, endpoint: str, counts: Mapping[str, int]) -> None:
        """Add to the endpoint's counters (calls, tokens, throttled, waits, wait_ms,
        requeues)."""
        ...

    def counters(self) -> dict[str, dict[str, int]]:
        """Every endpoint's counters."""
        ...


# --- in this process ---------------------------------------------------------------------


@dataclass
class _State:
    req: float = 0.0
    tok: float = 0.0
    at: float | None = None
    until: float = 0.0
    leases: dict[str, float] = field(default_factory=dict)

    def refill(self, limits: Limits, now: float) -> None:
        dt = max(0.0, now - self.at) if self.at is not None else 0.0
        rate = limits.period_s
        self.req = min(0.0, self.req + dt * limits.rpm / rate) if limits.rpm else 0.0
        self.tok = min(0.0, self.tok + dt * limits.tpm / rate) if limits.tpm else 0.0
        self.at = now if self.at is None else max(self.at, now)

    def wait(self, limits: Limits, now: float) -> float:
        if limits.never:
            return math.inf
        wait = max(0.0, self.until - now)
        if limits.rpm and self.req < -EPSILON:
            wait = max(wait, -self.req * limits.period_s / limits.rpm)
        if limits.tpm and self.tok < -EPSILON:
            wait = max(wait, -self.tok * limits.period_s / limits.tpm)
        if limits.max_concurrent:
            self.leases = {k: v for k, v in self.leases.items() if v > now}
            if len(self.leases) >= limits.max_concurrent:
                wait = max(wait, min(min(self.leases.values()) - now, POLL_S))
        return wait


class LocalBudgets:
    """The same budgets within one process (the embedded mode: no broker, no other process)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._states: dict[str, _State] = {}
        self._counters: dict[str, dict[str, int]] = {}
        self._spells: dict[str, tuple[float, float]] = {}  # failing since, last failure

    def take(self, endpoint: str, limits: Limits, tokens: int, lease: str, now: float) -> float:
        with self._lock:
            state = self._states.setdefault(endpoint, _State())
            state.refill(limits, now)
            wait = state.wait(limits, now)
            if wait > 0:
                return wait
            if limits.rpm:
                state.req -= 1
            if limits.tpm:
                state.tok -= tokens
            if limits.max_concurrent:
                state.leases[lease] = now + limits.lease_s
            return 0.0

    def settle(self, endpoint: str, limits: Limits, lease: str, refund: int, now: float) -> None:
        with self._lock:
            state = self._states.setdefault(endpoint, _State())
            state.refill(limits, now)
            if limits.tpm:
                state.tok = min(0.0, state.tok + refund)
            state.leases.pop(lease, None)

    def hold_off(self, endpoint: str, until: float) -> None:
        with self._lock:
            state = self._states.setdefault(endpoint, _State())
            state.until = max(state.until, until)

    def failing(self, endpoint: str, now: float, gap_s: float) -> float:
        with self._lock:
            since, last = self._spells.get(endpoint, (now, now))
            since = since if now - last <= gap_s else now
            self._spells[endpoint] = (since, now)
            return since

    def recovered(self, endpoint: str) -> None:
        with self._lock:
            self._spells.pop(endpoint, None)

    def count(self, endpoint: str, counts: Mapping[str, int]) -> None:
        with self._lock:
            mine = self._counters.setdefault(endpoint, dict.fromkeys(COUNTERS, 0))
            for name, value in counts.items():
                mine[name] = mine.get(name, 0) + value

    def counters(self) -> dict[str, dict[str, int]]:
        with self._lock:
            return {e: dict(c) for e, c in sorted(self._counters.items())}


# --- in Redis, for every process ---------------------------------------------------------

# The same arithmetic as _State, on the hash KEYS[1] (req, tok, at, until) and the lease set
# KEYS[2]. Limits come as numbers, -1 for unlimited. Lua numbers go back as strings: Redis
# would cut a returned number to an integer.
_REFILL = """
local now, period = tonumber(ARGV[1]), tonumber(ARGV[2])
local rpm, tpm, cap = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local s = redis.call('HMGET', KEYS[1], 'req', 'tok', 'at', 'until')
local req, tok = tonumber(s[1]) or 0, tonumber(s[2]) or 0
local at, hold = tonumber(s[3]) or now, tonumber(s[4]) or 0
local dt = math.max(0, now - at)
if rpm > 0 then req = math.min(0, req + dt * rpm / period) else req = 0 end
if tpm > 0 then tok = math.min(0, tok + dt * tpm / period) else tok = 0 end
at = math.max(at, now)
"""
_TAKE = (
    _REFILL
    + """
local need, lease, lapse = tonumber(ARGV[6]), ARGV[7], tonumber(ARGV[8])
local eps, poll = tonumber(ARGV[9]), tonumber(ARGV[10])
local wait = 0
if rpm == 0 or tpm == 0 or cap == 0 then
  wait = -1
else
  wait = math.max(0, hold - now)
  if rpm > 0 and req < -eps then wait = math.max(wait, -req * period / rpm) end
  if tpm > 0 and tok < -eps then wait = math.max(wait, -tok * period / tpm) end
  if cap > 0 then
    redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
    if redis.call('ZCARD', KEYS[2]) >= cap then
      local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
      wait = math.max(wait, math.min(tonumber(first[2]) - now, poll))
    end
  end
end
if wait == 0 then
  if rpm > 0 then req = req - 1 end
  if tpm > 0 then tok = tok - need end
  if cap > 0 then
    redis.call('ZADD', KEYS[2], now + lapse, lease)
    redis.call('EXPIRE', KEYS[2], math.ceil(lapse) + 60)
  end
end
redis.call('HSET', KEYS[1], 'req', tostring(req), 'tok', tostring(tok), 'at', tostring(at))
redis.call('EXPIRE', KEYS[1], 86400)
return tostring(wait)
"""
)
_SETTLE = (
    _REFILL
    + """
if tpm > 0 then tok = math.min(0, tok + tonumber(ARGV[6])) end
redis.call('ZREM', KEYS[2], ARGV[7])
redis.call('HSET', KEYS[1], 'req', tostring(req), 'tok', tostring(tok), 'at', tostring(at))
redis.call('EXPIRE', KEYS[1], 86400)
return 1
"""
)
_HOLD_OFF = """
local hold = tonumber(redis.call('HGET', KEYS[1], 'until')) or 0
if tonumber(ARGV[1]) > hold then redis.call('HSET', KEYS[1], 'until', ARGV[1]) end
redis.call('EXPIRE', KEYS[1], 86400)
return 1
"""


# A failing spell: "since:last failure" in a field of the budget's hash its scripts never read.
FAILING = "failing"
_FAILING = """
local now, gap = tonumber(ARGV[1]), tonumber(ARGV[2])
local since = now
local found = redis.call('HGET', KEYS[1], 'failing')
if found then
  local first, last = string.match(found, '([^:]+):([^:]+)')
  if tonumber(last) and now - tonumber(last) <= gap then since = tonumber(first) end
end
redis.call('HSET', KEYS[1], 'failing', string.format('%.3f:%.3f', since, now))
redis.call('EXPIRE', KEYS[1], 86400)
return string.format('%.3f', since)
"""


def _limit(value: int | None) -> int:
    return -1 if value is None else value


def _args(limits: Limits, now: float) -> list[float | int]:
    return [
        now,
        limits.period_s,
        _limit(limits.rpm),
        _limit(limits.tpm),
        _limit(limits.max_concurrent),
    ]


class RedisBudgets:
    """The budgets of every worker process, in the broker's Redis."""

    def __init__(self, client: redis.Redis) -> None:
        self._r = client
        self._take = client.register_script(_TAKE)
        self._settle = client.register_script(_SETTLE)
        self._hold_off = client.register_script(_HOLD_OFF)
        self._failing = client.register_script(_FAILING)

    def take(self, endpoint: str, limits: Limits, tokens: int, lease: str, now: float) -> float:
        found = self._take(
            keys=[keys.model_budget(endpoint), keys.model_leases(endpoint)],
            args=[*_args(limits, now), tokens, lease, limits.lease_s, EPSILON, POLL_S],
        )
        wait = float(found)
        return math.inf if wait < 0 else wait

    def settle(self, endpoint: str, limits: Limits, lease: str, refund: int, now: float) -> None:
        self._settle(
            keys=[keys.model_budget(endpoint), keys.model_leases(endpoint)],
            args=[*_args(limits, now), refund, lease],
        )

    def hold_off(self, endpoint: str, until: float) -> None:
        self._hold_off(keys=[keys.model_budget(endpoint)], args=[repr(until)])

    def failing(self, endpoint: str, now: float, gap_s: float) -> float:
        found = self._failing(keys=[keys.model_budget(endpoint)], args=[repr(now), gap_s])
        return float(found)

    def recovered(self, endpoint: str) -> None:
        self._r.hdel(keys.model_budget(endpoint), FAILING)

    def count(self, endpoint: str, counts: Mapping[str, int]) -> None:
        pipe = self._r.pipeline(transaction=False)
        pipe.sadd(keys.MODEL_ENDPOINTS, endpoint)
        for name, value in counts.items():
            if value:
                pipe.hincrby(keys.model_counters(endpoint), name, value)
        pipe.execute()

    def counters(self) -> dict[str, dict[str, int]]:
        return model_counters(self._r)


def model_counters(client: redis.Redis) -> dict[str, dict[str, int]]:
    """Every endpoint's counters as the workers keep them in Redis (the API reads these)."""
    endpoints = sorted(str(e) for e in cast(set[str], client.smembers(keys.MODEL_ENDPOINTS)))
    pipe = client.pipeline(transaction=False)
    for endpoint in endpoints:
        pipe.hgetall(keys.model_counters(endpoint))
    out: dict[str, dict[str, int]] = {}
    for endpoint, found in zip(endpoints, pipe.execute(), strict=True):
        counts = dict.fromkeys(COUNTERS, 0)
        counts.update({str(k): int(v) for k, v in cast(dict[str, str], found).items()})
        out[endpoint] = counts
    return out
