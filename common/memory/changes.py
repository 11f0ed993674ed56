"""A change set: every record a commit touched, recorded as a plan and written in one go."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from pydantic import BaseModel, Field

from common.llm import usage
from common.models.memory import Event, Fact, MemoryVersion, Profile
from common.models.plan import Plan, PlannedPoint, pack_vector, unpack_vector
from common.store.base import Kind, Point, Store


class CommitStats(BaseModel):
    """Counts a job reports for one session. Model calls are counted once, by the meter
    (common/llm/usage.py) into `llm_usage`; `llm_calls` and `llm_calls_skipped` are its
    totals over the stages."""

    turns: int = 0
    facts_in: int = 0
    facts_stored: int = 0
    duplicates_dropped: int = 0
    updates: int = 0
    events_created: int = 0
    events_touched: int = 0
    profile_changes: int = 0
    llm_usage: dict[str, int] = Field(
        default_factory=dict, description="model calls and tokens: `llm.<stage>.<what>`"
    )

    @property
    def llm_calls(self) -> int:
        return usage.Usage.from_counts(self.llm_usage).total("calls")

    @property
    def llm_calls_skipped(self) -> int:
        return usage.Usage.from_counts(self.llm_usage).total("skipped")

    def add(self, other: CommitStats) -> None:
        for name in type(self).model_fields:
            if name == "llm_usage":
                self.add_usage(other.llm_usage)
            else:
                setattr(self, name, getattr(self, name) + getattr(other, name))

    def add_usage(self, counts: dict[str, int]) -> None:
        for key, value in counts.items():
            self.llm_usage[key] = self.llm_usage.get(key, 0) + value

    @classmethod
    def from_counts(cls, counts: dict[str, int]) -> CommitStats:
        """The inverse of `counts` (a job's counts back into stats)."""
        llm = {k: v for k, v in counts.items() if k.startswith("llm.")}
        plain = {k: v for k, v in counts.items() if not k.startswith("llm.")}
        return cls.model_validate({**plain, "llm_usage": llm})

    def counts(self) -> dict[str, int]:
        """Flat counts, as a job reports them."""
        flat = self.model_dump(exclude={"llm_usage"})
        totals = {"llm_calls": self.llm_calls, "llm_calls_skipped": self.llm_calls_skipped}
        return {**flat, **totals, **self.llm_usage}


def planned_points(plan: Plan) -> list[tuple[Kind, Point]]:
    """The plan's points as the store takes them, in plan order."""
    return [
        (
            Kind(p.kind),
            Point(
                id=p.id,
                payload=p.payload,
                vector=unpack_vector(p.vector) if p.vector is not None else None,
            ),
        )
        for p in plan.points
    ]


def apply_plan(store: Store, plan: Plan, *also: tuple[Kind, Point]) -> None:
    """Write every planned point, then `also` (a stage's finished session record), as one
    store write: on Qdrant Edge one log entry, applied whole; on a server kind by kind in the
    order the kinds first appear, so what comes last lands last. Points of a single kind go
    through that kind's `upsert`, the same write."""
    points = [*planned_points(plan), *also]
    kinds = {kind for kind, _ in points}
    if len(kinds) > 1:
        store.write(points)
    elif kinds:
        store.upsert(kinds.pop(), [point for _, point in points])


@dataclass
class Changes:
    """Records touched by a commit, with their current vectors. With a `version`, every
    record recorded is stamped with it: whoever writes a record last names what built it."""

    facts: dict[str, Fact] = field(default_factory=dict)
    events: dict[str, Event] = field(default_factory=dict)
    profiles: dict[str, Profile] = field(default_factory=dict)
    vectors: dict[tuple[Kind, str], np.ndarray] = field(default_factory=dict)
    version: MemoryVersion | None = None

    def _stamp(self, record: Fact | Event | Profile) -> None:
        # In place: the record is the one the space index holds, so the index and the store
        # agree without a second copy of every touched record.
        if self.version is not None and record.memory_version is not self.version:
            record.memory_version = self.version

    def fact(self, fact: Fact, vector: np.ndarray) -> None:
        self._stamp(fact)
        self.facts[fact.id] = fact
        self.vectors[(Kind.FACTS, fact.id)] = vector

    def event(self, event: Event, vector: np.ndarray) -> None:
        self._stamp(event)
        self.events[event.id] = event
        self.vectors[(Kind.EVENTS, event.id)] = vector

    def profile(self, profile: Profile, vector: np.ndarray) -> None:
        self._stamp(profile)
        self.profiles[profile.id] = profile
        self.vectors[(Kind.PROFILES, profile.id)] = vector

    def plan(self) -> Plan:
        points: list[PlannedPoint] = []
        groups: list[tuple[Kind, dict[str, Fact] | dict[str, Event] | dict[str, Profile]]] = [
            (Kind.FACTS, self.facts),
            (Kind.EVENTS, self.events),
            (Kind.PROFILES, self.profiles),
        ]
        for kind, records in groups:
            for record_id, record in records.items():
                vector = self.vectors[(kind, record_id)]
                points.append(
                    PlannedPoint(
                        kind=kind.value,
                        id=record_id,
                        payload=record.model_dump(mode="json"),
                        vector=pack_vector(vector),
                    )
                )
        return Plan(points=points)
