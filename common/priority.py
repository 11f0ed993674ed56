"""Questions first inside one process: while a question is answered here, background work
(ingest's encodes and commits) steps aside at its next checkpoint.

A process that owns an embedded store answers questions on threads beside the pipeline's
(workers/query_slots.py). Own threads are not enough on a busy CPU: the model's threads take
the cores and the commit thread's Python takes the interpreter lock, so a question that
needs 20 ms of both got a third of each. Here a question marks itself in flight
(`answering`), and background work calls `checkpoint()` between its steps (each forward pass
of a shared encode, each draft a commit verifies): while a question is in flight, it waits
until none is, or `longest_wait` s at most (`broker.question_yield_s`; 0: never), so a
steady stream of questions slows ingest without stopping it. A question waits for the step
under way at most.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

# A background step waits at most this long for the questions in flight (a question's p50
# alone is a few ms in the task; its p95 under load about 50 ms)
LONGEST_WAIT_S = 0.1


_ANSWERING: ContextVar[bool] = ContextVar("atommem_answering", default=False)


def answering_here() -> bool:
    """Whether this thread is answering a question."""
    return _ANSWERING.get()


class QuestionsFirst:
    """Counts the questions in flight; background work yields to them at checkpoints."""

    def __init__(self, longest_wait: float = LONGEST_WAIT_S) -> None:
        self._cond = threading.Condition()
        self._answering = 0
        self.longest_wait = longest_wait
        self.yielded_s = 0.0  # background time spent waiting, for the benchmarks

    @contextmanager
    def answering(self) -> Iterator[None]:
        """A question in flight on this thread (whose own checkpoints never wait)."""
        with self._cond:
            self._answering += 1
        token = _ANSWERING.set(True)
        try:
            yield
        finally:
            _ANSWERING.reset(token)
            with self._cond:
                self._answering -= 1
                if self._answering == 0:
                    self._cond.notify_all()

    @property
    def busy(self) -> bool:
        return self._answering > 0

    def checkpoint(self) -> None:
        """Between two steps of background work: wait while questions are in flight, up to
        the longest wait. Free when none is (one read of a counter), and on a thread that is
        answering one (a question's own encodes)."""
        if self._answering == 0 or self.longest_wait <= 0 or _ANSWERING.get():
            return
        began = time.perf_counter()
        with self._cond:
            self._cond.wait_for(lambda: self._answering == 0, timeout=self.longest_wait)
        self.yielded_s += time.perf_counter() - began


questions = QuestionsFirst()
