"""Stand-ins for the model-backed ports: an encoder that looks vectors up in a table, and the
rules backend with the decisions a test sets."""

from __future__ import annotations

import numpy as np

from common.llm.contracts import FactView, VerifyDecision
from common.llm.rules import RulesBackend
from common.settings import Settings

DIM = 4


def unit(*values: float) -> np.ndarray:
    v = np.asarray(values, dtype=np.float32)
    return v / np.linalg.norm(v)


class TableEncoder:
    """Vectors looked up by text; unknown texts get a fixed vector."""

    dimension = DIM

    def __init__(self, table: dict[str, np.ndarray] | None = None) -> None:
        self.table = table or {}
        self.calls = 0

    def encode(self, texts: list[str]) -> np.ndarray:
        self.calls += 1
        rows = [self.table.get(t, unit(0, 0, 0, 1)) for t in texts]
        return np.stack(rows) if rows else np.zeros((0, DIM), dtype=np.float32)


class ScriptedBackend(RulesBackend):
    """The rules backend with event links and verification decisions set by the test."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings.rules, settings.memory)
        self.links: dict[str, list[str]] = {}
        self.verdicts: dict[str, VerifyDecision] = {}
        self.seen_candidates: dict[str, list[str]] = {}

    def link_event(self, new: FactView, similar: list[FactView]) -> list[str]:
        self.seen_candidates[new.text] = [s.id for s in similar]
        wanted = self.links.get(new.text, [])
        by_text = {s.text: s.id for s in similar}
        return [by_text[t] for t in wanted if t in by_text]

    def verify(self, new: FactView, candidates: list[FactView]) -> VerifyDecision:
        return self.verdicts.get(new.text, VerifyDecision())


class Clock:
    """A monotonic clock that moves only when slept on, noting each sleep (a budget's waits
    without waiting)."""

    def __init__(self, now: float) -> None:
        self.now = now
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds
