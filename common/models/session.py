"""Dialogue input: turns and sessions as chat backends hand them over, and their stored records."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from common.models import ids
from common.models.names import SPACE, person_name
from common.models.plan import Plan

NAME_MAX = 128
OFFSET_MAX = 24 * 60 - 1  # minutes: every UTC offset a datetime can carry
MAX_ORDER = 2**53  # seq and positions: exact as JSON numbers and Redis scores

NOT_BLANK = rf"[^{SPACE}]"


def not_blank(value: str) -> bool:
    return re.search(NOT_BLANK, value) is not None


class Turn(BaseModel):
    """One utterance. `facts` carries pre-extracted atomic facts and skips the extractor."""

    id: str | None = Field(default=None, description="External turn id, e.g. LoCoMo's dia_id.")
    speaker: str = Field(min_length=1, max_length=NAME_MAX)
    text: str
    position: int | None = Field(
        default=None, ge=0, le=MAX_ORDER, description="Order within the session."
    )
    image_caption: str | None = None
    facts: list[str] | None = None

    @field_validator("speaker")
    @classmethod
    def _strip_speaker(cls, value: str) -> str:
        if not not_blank(value):
            raise ValueError("speaker is blank")
        return person_name(value)


class SessionInput(BaseModel):
    """A finished dialogue session, validated in full before anything is stored."""

    session_id: str = Field(min_length=1, max_length=256)
    started_at: datetime
    participants: list[str] = Field(min_length=1)
    turns: list[Turn] = Field(min_length=1)
    seq: int | None = Field(
        default=None, ge=0, le=MAX_ORDER, description="Order of the session in its space."
    )
    utc_offset: int | None = Field(
        default=None,
        ge=-OFFSET_MAX,
        le=OFFSET_MAX,
        description="Minutes east of UTC where the session took place, beside a naive UTC "
        "`started_at`: relative phrases are anchored in that local time.",
    )

    @field_validator("participants")
    @classmethod
    def _clean_participants(cls, value: list[str]) -> list[str]:
        if not all(not_blank(p) for p in value):
            raise ValueError("a participant name is blank")
        cleaned = [person_name(p) for p in value]
        if len(set(cleaned)) != len(cleaned):
            raise ValueError(f"participants repeat a name: {cleaned}")
        return cleaned

    @model_validator(mode="after")
    def _check_turns(self) -> SessionInput:
        if self.utc_offset is not None and self.started_at.tzinfo is not None:
            raise ValueError("utc_offset goes with a naive started_at, not one with an offset")
        known = set(self.participants)
        seen: set[str] = set()
        for index, turn in enumerate(self.turns):
            if turn.speaker not in known:
                raise ValueError(
                    f"turn {turn.id or index}: unknown speaker {turn.speaker!r} "
                    f"(participants: {', '.join(self.participants)})"
                )
            if turn.position is None:
                turn.position = index
            if turn.id is None:
                turn.id = f"{self.session_id}:{turn.position}"
            if turn.id in seen:
                raise ValueError(f"turn id {turn.id!r} appears twice in session {self.session_id}")
            seen.add(turn.id)
        if not any(not_blank(t.text) or t.facts for t in self.turns):
            raise ValueError(f"session {self.session_id} has no text in any turn")
        return self

    def content_hash(self) -> str:
        """What the session says, hashed: the same id with another hash is other content
        (its order in the space aside)."""
        # The offset is left out: the same words at the same instant are the same session,
        # as they were when sessions were stored without one.
        return ids.content_hash(self.model_dump(mode="json", exclude={"seq", "utc_offset"}))

    @property
    def local_time(self) -> datetime:
        """The start as a naive wall-clock time where the session took place, the time that
        "yesterday" and "today" are anchored in: a time with an offset read in that offset,
        a naive one shifted by `utc_offset` (naive UTC when there is none)."""
        if self.started_at.tzinfo is not None:
            return self.started_at.replace(tzinfo=None)
        return self.started_at + timedelta(minutes=self.utc_offset or 0)

    @property
    def order(self) -> int:
        """Position in its space: `seq` when given, else the start time in seconds (a naive
        time is UTC)."""
        if self.seq is not None:
            return self.seq
        started = self.started_at
        return int((started if started.tzinfo else started.replace(tzinfo=UTC)).timestamp())

    @property
    def pre_extracted(self) -> bool:
        return any(t.facts is not None for t in self.turns)


SessionStatus = Literal["accepted", "committing", "committed", "profiling", "done"]


class SessionRecord(BaseModel):
    """A session as stored: the raw input, its order in the space and its commit state."""

    tenant: str
    space: str
    session: SessionInput
    seq: int
    content_hash: str
    status: SessionStatus
    stats: dict[str, int] = Field(default_factory=dict)
    job_id: str | None = None
    plan: Plan | None = Field(default=None, description="Writes of the stage in progress.")


class SpaceRecord(BaseModel):
    """One memory bank of a tenant."""

    tenant: str
    space: str
    created_at: datetime
    participants: list[str] = Field(default_factory=list)
