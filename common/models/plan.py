"""A write plan: the upserts of one commit stage, recorded before they are applied."""

from __future__ import annotations

from pydantic import BaseModel, Field


class PlannedPoint(BaseModel):
    kind: str
    id: str
    payload: dict[str, object]
    vector: list[float] | None = None


class Plan(BaseModel):
    """Re-applying a plan is harmless: same ids, same payloads."""

    points: list[PlannedPoint] = Field(default_factory=list)
