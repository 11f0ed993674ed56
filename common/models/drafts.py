"""A fact as extraction hands it to the memory stage: text, provenance, metadata, vector."""

from __future__ import annotations

from pydantic import BaseModel, Field

from common.models.memory import TimeRange
from common.models.plan import PackedVector


class DraftFact(BaseModel):
    id: str
    text: str = Field(min_length=1)
    turn_ids: list[str] = Field(min_length=1)
    positions: list[int]
    participants: list[str]
    keywords: list[str]
    event_time: TimeRange | None = None
    profile_worthy: bool = False
    vector: PackedVector = Field(description="The text's embedding, packed (`unpack_vector`).")
