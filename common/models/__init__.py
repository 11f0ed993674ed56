"""Pydantic models for every boundary: sessions, memory records, LLM contracts."""

from common.models.memory import (
    Event,
    Fact,
    FactRevision,
    FactSource,
    FactTime,
    Profile,
    ProfileVersion,
    TimeRange,
)
from common.models.session import SessionInput, SessionRecord, SpaceRecord, Turn

__all__ = [
    "Event",
    "Fact",
    "FactRevision",
    "FactSource",
    "FactTime",
    "Profile",
    "ProfileVersion",
    "SessionInput",
    "SessionRecord",
    "SpaceRecord",
    "TimeRange",
    "Turn",
]
