"""Memory records: atomic facts, events and temporal profiles (DESIGN §3)."""

from __future__ import annotations

from datetime import date, datetime
from typing import Annotated

from pydantic import AfterValidator, BaseModel, Field, WithJsonSchema, model_validator


class TimeRange(BaseModel):
    """An inclusive interval of days; a single day has start == end."""

    start: date
    end: date

    @model_validator(mode="after")
    def _ordered(self) -> TimeRange:
        if self.end < self.start:
            raise ValueError(f"time range ends ({self.end}) before it starts ({self.start})")
        return self

    def overlaps(self, other: TimeRange) -> bool:
        return self.start <= other.end and other.start <= self.end

    def union(self, other: TimeRange) -> TimeRange:
        return TimeRange(start=min(self.start, other.start), end=max(self.end, other.end))


# Said-at times are kept in UTC without an offset (with one only where the input had one),
# so the API's schema says so instead of RFC 3339's `date-time`, which requires an offset.
SAID_AT = WithJsonSchema(
    {
        "type": "string",
        "pattern": r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})?$",
        "description": "ISO 8601; UTC when it has no offset",
    }
)


class FactTime(BaseModel):
    """When a fact happened (anchored, may be unknown) and when it was said."""

    event: TimeRange | None = None
    session: Annotated[datetime, SAID_AT]

    def trait_start(self) -> datetime:
        """When a trait this fact states began: the start of its event when that lies in
        the past of the session, else the moment it was said."""
        span = self.event
        if span is not None and span.start <= self.session.date():
            return datetime.combine(span.start, datetime.min.time())
        return self.session

    def effective(self) -> TimeRange:
        """The event interval if known, else the session day."""
        if self.event is not None:
            return self.event
        day = self.session.date()
        return TimeRange(start=day, end=day)


class MemoryVersion(BaseModel):
    """What built a record: the extractor, the general model, the prompt versions and a short
    hash of the settings that shape memory (common/memory/version.py computes it)."""

    extractor_backend: str
    extractor_model: str
    general_model: str
    prompts: dict[str, str] = Field(description="stage -> prompt VERSION")
    settings_hash: str = Field(description="12 hex digits over the memory-shaping settings")

    def key(self) -> tuple[str, ...]:
        return (
            self.extractor_backend,
            self.extractor_model,
            self.general_model,
            self.settings_hash,
            *(f"{stage}={version}" for stage, version in sorted(self.prompts.items())),
        )

    @property
    def label(self) -> str:
        """A one-line name: backend, models and the settings hash (prompts included)."""
        models = self.extractor_model
        if self.general_model != self.extractor_model:
            models += f"+{self.general_model}"
        return f"{self.extractor_backend}:{models}@{self.settings_hash}"


# One instance per distinct version in a process: a space's records share the few versions
# that built it, instead of a copy each (100k facts in an index, saved indexes pickled).
_VERSIONS: dict[tuple[str, ...], MemoryVersion] = {}


def interned(version: MemoryVersion | None) -> MemoryVersion | None:
    """The process's one instance equal to `version`."""
    if version is None:
        return None
    return _VERSIONS.setdefault(version.key(), version)


Stamp = Annotated[MemoryVersion | None, AfterValidator(interned)]


class FactSource(BaseModel):
    """Provenance: the session and turns a fact was drawn from."""

    session_id: str
    session_seq: int
    turn_ids: list[str]
    positions: list[int]


class Correction(BaseModel):
    """A caller's correction of a fact's text (`PATCH .../facts/{id}`): when, and why."""

    at: Annotated[datetime, SAID_AT] = Field(description="when it was sent (UTC)")
    reason: str | None = None


class FactRevision(BaseModel):
    """A previous state of a fact that a verified update, or a correction, replaced."""

    text: str
    keywords: list[str]
    time: FactTime
    replaced_by_session: str | None = Field(
        description="the session whose verified update replaced this text; null when a "
        "correction did (`correction`)"
    )
    replaced_with_fact: str
    correction: Correction | None = None


class Fact(BaseModel):
    """One atomic, self-contained, third-person statement."""

    id: str
    tenant: str
    space: str
    text: str
    participants: list[str]
    keywords: list[str]
    time: FactTime
    event_ids: list[str] = Field(default_factory=list)
    source: FactSource
    also_from: list[FactSource] = Field(default_factory=list)
    profile_pending: bool = False
    history: list[FactRevision] = Field(default_factory=list)
    memory_version: Stamp = None

    def all_turn_ids(self) -> list[str]:
        ids = list(self.source.turn_ids)
        for extra in self.also_from:
            ids.extend(t for t in extra.turn_ids if t not in ids)
        return ids


class Event(BaseModel):
    """A cluster of facts about one happening (Algorithm 1)."""

    id: str
    tenant: str
    space: str
    summary: str
    fact_ids: list[str]
    participants: list[str]
    keywords: list[str]
    time_span: TimeRange | None = None
    memory_version: Stamp = None
    # How many of `fact_ids` (the first ones) its summary, keywords and vector were made
    # from; None when all. A commit with the space's next session ready behind it leaves its
    # events' summaries to a later commit (`memory.event_refresh_batch`): the facts after
    # these are the ones a revised summary still has to take in.
    summarized: int | None = None

    @property
    def stale(self) -> bool:
        """Whether facts joined it since its summary was made."""
        return self.summarized is not None and self.summarized < len(self.fact_ids)


class ProfileVersion(BaseModel):
    """A state of a profile that held during [t_from, t_to)."""

    content: str
    keywords: list[str]
    evidence_fact_ids: list[str]
    t_from: date
    t_to: date


class Profile(BaseModel):
    """A lasting trait of one person, with its earlier versions."""

    id: str
    tenant: str
    space: str
    person: str
    content: str
    keywords: list[str]
    evidence_fact_ids: list[str]
    t_from: date
    history: list[ProfileVersion] = Field(default_factory=list)
    memory_version: Stamp = None
    # A trait the person holds one value of at a time (`residence`), when the backend says so:
    # a later statement of the slot is this profile's next version rather than a new profile.
    slot: str | None = None

    def as_of(self, day: date) -> Profile | None:
        """The profile as it stood on `day`: the version then in force as its content, the
        versions before it as its history; None when it did not hold yet."""
        version = self.version_at(day)
        if not isinstance(version, ProfileVersion):  # None, or this profile itself
            return version
        return self.standing(version, [v for v in self.history if v.t_to <= version.t_from])

    def standing(self, current: ProfileVersion, history: list[ProfileVersion]) -> Profile:
        """This profile with `current` as its state and `history` as its earlier versions."""
        return self.model_copy(
            update={
                "content": current.content,
                "keywords": current.keywords,
                "evidence_fact_ids": current.evidence_fact_ids,
                "t_from": current.t_from,
                "history": history,
            }
        )

    def version_at(self, day: date) -> ProfileVersion | Profile | None:
        """The state valid on `day`: the current one from t_from, else a historical one."""
        if day >= self.t_from:
            return self
        for version in self.history:
            if version.t_from <= day < version.t_to:
                return version
        return None
