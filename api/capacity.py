"""How many requests one API process lets wait on a worker's reply, and where they wait.

A search, an ask, a read of stored memory or an admin write sends a task and blocks a thread
until a worker answers (up to `api.query_timeout_s` or `api.admin_timeout_s`). Those waits
take a slot here, at most `api.waits_per_tenant` of them per tenant (beyond it a 429) and
`api.wait_slots` in all (beyond it a 503, and /readyz reports the process saturated), and the
HTTP routes run them on a thread pool of their own. Key checks, job reads and every other
Redis-only call keep anyio's default pool, so no number of slow queries delays them; the MCP
tools' waits run in that default pool (the SDK's), so it is grown by `api.wait_slots`: the
waits it can ever hold leave it its usual 40 threads."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TypeVar

import anyio
import anyio.to_thread

from common.errors import Unavailable
from common.service import OverQuota
from common.settings import ApiSettings

T = TypeVar("T")
# Threads beyond the slots: a request refused for want of a slot takes one for an instant,
# so refusals never queue behind the waits they are refused for.
SPARE_THREADS = 8
RETRY_S = 5.0  # a wait lasts seconds to a minute; sooner than this rarely finds a slot free


class WaitSlots:
    """The process's slots for requests that wait on a worker, counted per tenant; safe to
    take from any thread (the routes' pool and the MCP tools' alike)."""

    def __init__(self, limits: ApiSettings) -> None:
        self.size = limits.wait_slots
        self.per_tenant = limits.waits_per_tenant
        self.threads = anyio.CapacityLimiter(self.size + SPARE_THREADS)
        self._lock = threading.Lock()
        self._held: Counter[str] = Counter()

    @property
    def taken(self) -> int:
        return self._held.total()

    @property
    def full(self) -> bool:
        return self.taken >= self.size

    @contextmanager
    def slot(self, tenant: str) -> Iterator[None]:
        """Hold one of `tenant`'s slots while the block waits; refused at once when the
        tenant, or the whole process, has none free."""
        with self._lock:
            if self._held[tenant] >= self.per_tenant:
                raise OverQuota(
                    f"this tenant already has {self.per_tenant} requests waiting on workers "
                    "(the most api.waits_per_tenant allows); try again once some have answered",
                    RETRY_S,
                )
            if self._held.total() >= self.size:
                raise Unavailable(
                    f"this API process has {self.size} requests waiting on workers (the most "
                    "api.wait_slots allows); try again, or another replica"
                )
            self._held[tenant] += 1
        try:
            yield
        finally:
            with self._lock:
                self._held[tenant] -= 1
                if not self._held[tenant]:
                    del self._held[tenant]

    def gate(self, tenant: str) -> Callable[[], AbstractContextManager[None]]:
        """What a tenant's `TenantMemory` holds around each call that waits on a worker."""
        return lambda: self.slot(tenant)

    async def run(self, call: Callable[[], T]) -> T:
        """`call()` on the waiting pool's threads: a route's call that may wait on a worker
        (it takes its slot inside, through the tenant's `TenantMemory`)."""
        return await anyio.to_thread.run_sync(call, limiter=self.threads)
