"""Bodies the HTTP API accepts: strict (unknown fields are refused) and bounded."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from common.models.session import NAME_MAX, SessionInput, Turn

MAX_TURNS = 2000
MAX_TEXT = 20_000
SPACE_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
TENANT_NAME = r"^[a-z0-9][a-z0-9_-]{0,63}$"

Name = Annotated[str, StringConstraints(min_length=1, max_length=NAME_MAX)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SpaceCreate(Strict):
    name: str = Field(pattern=SPACE_NAME, description="letters, digits, '.', '_', '-'")


class TurnBody(Strict):
    id: str | None = Field(default=None, min_length=1, max_length=256)
    speaker: Name
    text: str = Field(default="", max_length=MAX_TEXT)
    position: int | None = Field(default=None, ge=0, le=1_000_000)
    image_caption: str | None = Field(default=None, max_length=4000)
    facts: list[Annotated[str, StringConstraints(min_length=1, max_length=2000)]] | None = Field(
        default=None, max_length=200
    )


class SessionBody(Strict):
    """A finished session: every turn needs text (or a caption, or pre-extracted facts)."""

    session_id: str = Field(min_length=1, max_length=256)
    started_at: datetime
    participants: list[Name] = Field(min_length=1, max_length=50)
    turns: list[TurnBody] = Field(min_length=1, max_length=MAX_TURNS)
    seq: int | None = Field(default=None, ge=0, le=2**53)

    @field_validator("session_id")
    @classmethod
    def _printable(cls, value: str) -> str:
        if not value.strip() or re.search(r"[\x00-\x1f/]", value):
            raise ValueError("session_id must be printable, not blank, and contain no '/'")
        return value

    @field_validator("turns")
    @classmethod
    def _texts(cls, turns: list[TurnBody]) -> list[TurnBody]:
        for i, turn in enumerate(turns):
            if not (turn.text.strip() or (turn.image_caption or "").strip() or turn.facts):
                raise ValueError(f"turn {turn.id or i} has no text")
        return turns

    def to_session(self) -> SessionInput:
        """The session as ingest takes it (its own checks: speakers, repeated turn ids)."""
        started = self.started_at
        if started.tzinfo is not None:  # memory keeps naive UTC times
            started = started.astimezone(UTC).replace(tzinfo=None)
        return SessionInput(
            session_id=self.session_id,
            started_at=started,
            participants=self.participants,
            turns=[Turn(**t.model_dump()) for t in self.turns],
            seq=self.seq,
        )


class QueryBody(Strict):
    question: str = Field(min_length=1, max_length=2000)
    k: int | None = Field(default=None, ge=1, le=100)
    mode: Literal["full", "flat", "no-graph", "no-profile"] | None = None

    @field_validator("question")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the question is blank")
        return value


class TenantCreate(Strict):
    name: str = Field(pattern=TENANT_NAME, description="lowercase letters, digits, '_', '-'")
