"""bench.query_clients' clients: each of N threads asks its own run of the questions, all
through the one producer, and every round trip is counted once."""

from __future__ import annotations

import threading
from typing import Any

from bench.query_clients import SPACE, TENANT, ask_together


class _Client:
    def __init__(self) -> None:
        self.asked: list[tuple[str, str, str]] = []
        self.threads: set[str] = set()
        self._lock = threading.Lock()

    def search(self, tenant: str, space: str, question: str, **_: Any) -> None:
        with self._lock:
            self.asked.append((tenant, space, question))
            self.threads.add(threading.current_thread().name)


def test_each_client_asks_its_own_questions_and_every_latency_is_kept() -> None:
    client = _Client()
    asks = [f"q{i}" for i in range(5)]
    latencies = ask_together(client, asks, clients=3, each=4)
    assert len(latencies) == 12 and all(ms >= 0 for ms in latencies)
    assert len(client.threads) == 3
    assert {(t, s) for t, s, _ in client.asked} == {(TENANT, SPACE)}
    # client c asks questions c*4 .. c*4+3, cycling through the five
    expected = sorted(asks[(c * 4 + i) % 5] for c in range(3) for i in range(4))
    assert sorted(q for _, _, q in client.asked) == expected
