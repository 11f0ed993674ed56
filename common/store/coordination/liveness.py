"""Which jobs this process is working on, marked as progressing every few seconds while it
works on them, so that a long step is never taken for a lost one (see workers.leases).

A stage wraps its work in `JOB_LIVENESS.working_on(tenant, job_id)`; a worker turns the marking
on with `JOB_LIVENESS.configure`. Until then (the embedded mode, tests) it does nothing.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager

log = logging.getLogger(__name__)

Touch = Callable[[str, list[str]], None]


class JobLiveness:
    """The jobs this process works on, and the thread that marks them as progressing."""

    def __init__(self) -> None:
        self._active: Counter[tuple[str, str]] = Counter()
        self._lock = threading.Lock()
        self._touch: Touch | None = None
        self._every_s = 10.0
        self._thread: threading.Thread | None = None
        self._pid = 0

    @property
    def configured(self) -> bool:
        return self._touch is not None

    def configure(self, touch: Touch | None, every_s: float = 10.0) -> None:
        """Mark the jobs in progress with `touch` every `every_s` seconds (None: stop)."""
        with self._lock:
            self._touch, self._every_s = touch, every_s

    @contextmanager
    def working_on(self, tenant: str, job_id: str) -> Iterator[None]:
        key = (tenant, job_id)
        with self._lock:
            self._active[key] += 1
            if self._touch is not None and (
                self._thread is None or self._pid != os.getpid() or not self._thread.is_alive()
            ):
                self._pid = os.getpid()  # a forked child starts its own thread
                self._thread = threading.Thread(
                    target=self._run, name="atommem-job-liveness", daemon=True
                )
                self._thread.start()
        try:
            yield
        finally:
            with self._lock:
                self._active[key] -= 1
                if self._active[key] <= 0:
                    del self._active[key]

    def mark(self) -> None:
        """Mark every job in progress here as progressing now."""
        with self._lock:
            touch = self._touch
            by_tenant: dict[str, list[str]] = {}
            for tenant, job_id in self._active:
                by_tenant.setdefault(tenant, []).append(job_id)
        if touch is None:
            return
        for tenant, job_ids in by_tenant.items():
            touch(tenant, job_ids)

    def _run(self) -> None:
        while True:
            time.sleep(self._every_s)
            try:
                self.mark()
            except Exception as exc:  # Redis briefly away: the next round tries again
                log.warning("marking jobs in progress failed: %s", exc)


JOB_LIVENESS = JobLiveness()
