"""Bodies the HTTP API accepts: strict (unknown fields are refused) and bounded."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
)
from pydantic.config import JsonDict

from common.errors import InvalidInput
from common.models.names import person_name
from common.models.query import CONTEXT_TOKENS, RecallMode
from common.models.session import MAX_ORDER, NAME_MAX, NOT_BLANK, SessionInput, Turn, not_blank

MAX_TURNS = 2000
MAX_TEXT = 20_000
FACT_MAX = 2000  # a fact's text, as a turn's pre-extracted facts and a correction take it
SPACE_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
TENANT_NAME = r"^[a-z0-9][a-z0-9_-]{0,63}$"
ISO_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?([Zz]|[+-]\d{2}:?\d{2})?")

# Session times the API takes: any dialogue's, and every one converts to UTC, orders as
# seconds and anchors relative phrases ("in 999 years") inside the calendar.
EARLIEST = datetime(1900, 1, 1, tzinfo=UTC)
LATEST = datetime(2999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)
TIME_RANGE = "1900-01-01T00:00:00Z to 2999-12-31T23:59:59Z"

# A session id is one URL path segment: no control character or '/', and not '.' or '..'
# (clients and proxies resolve those as dot segments and would reach another resource).
_UNSAFE = r"\u0000-\u001f\u007f-\u009f/"
SESSION_ID = rf"^[^{_UNSAFE}]+$"
SESSION_ID_RULE = "one URL path segment: no control character or '/', not blank, not '.' or '..'"


def check_session_id(value: str) -> str:
    """The id, when it is one URL path segment every route can name."""
    if value in (".", "..") or not not_blank(value) or re.search(f"[{_UNSAFE}]", value):
        raise ValueError(f"session_id must be {SESSION_ID_RULE}")
    return value


def iso_text(value: object) -> object:
    """A session time as ISO 8601 text (or a datetime): pydantic would also take a number,
    or a string of digits, as Unix seconds."""
    if isinstance(value, datetime) or isinstance(value, str) and ISO_TIME.fullmatch(value):
        return value
    raise ValueError("must be an ISO 8601 date and time, e.g. 2024-03-04T19:10:00Z")


def check_time(value: datetime) -> datetime:
    """A session time within TIME_RANGE once its offset is applied (naive times are UTC)."""
    try:
        utc = value.astimezone(UTC) if value.tzinfo is not None else value.replace(tzinfo=UTC)
    except OverflowError:
        utc = None
    if utc is None or not EARLIEST <= utc <= LATEST:
        raise ValueError(f"must be from {TIME_RANGE} once its offset is applied")
    return value


# Blank names and questions are refused by validators (with a plain message); the schema
# states the same rule as a pattern.
def _named(value: str) -> str:
    if not not_blank(value):
        raise ValueError("a name must not be blank")
    return value


Name = Annotated[
    str,
    StringConstraints(min_length=1, max_length=NAME_MAX),
    Field(json_schema_extra={"pattern": NOT_BLANK}),
    AfterValidator(_named),
]

# What the schema states of a turn's content, as the server checks it: text, a caption or
# pre-extracted facts, not blank (a session needs text or facts in some turn).
_HAS_TEXT: JsonDict = {
    "required": ["text"],
    "properties": {"text": {"type": "string", "pattern": NOT_BLANK}},
}
_HAS_FACTS: JsonDict = {
    "required": ["facts"],
    "properties": {"facts": {"type": "array", "minItems": 1}},
}
_HAS_CAPTION: JsonDict = {
    "required": ["image_caption"],
    "properties": {"image_caption": {"type": "string", "pattern": NOT_BLANK}},
}


class Strict(BaseModel):
    """Unknown fields are refused; integer fields (`strict=True`) take no `true` or "1"."""

    model_config = ConfigDict(extra="forbid")


SPACE_NAME_RULE = "1-128 letters, digits, '.', '_' or '-', starting with a letter or digit"


def _space_name(value: str) -> str:
    if not re.fullmatch(SPACE_NAME, value):
        raise ValueError(f"{value!r} is no space name: {SPACE_NAME_RULE}")
    return value


# A space name in a body: the pattern stated in the schema, the rule said in words on refusal.
SpaceName = Annotated[
    str, Field(json_schema_extra={"pattern": SPACE_NAME}), AfterValidator(_space_name)
]


class SpaceCreate(Strict):
    name: SpaceName = Field(description="letters, digits, '.', '_', '-'")


class SpaceRebuild(Strict):
    into: SpaceName = Field(description="the new (or empty) space the sessions are rebuilt into")


class TurnBody(Strict):
    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"anyOf": [_HAS_TEXT, _HAS_CAPTION, _HAS_FACTS]}
    )

    id: str | None = Field(default=None, min_length=1, max_length=256)
    speaker: Name
    text: str = Field(default="", max_length=MAX_TEXT)
    position: int | None = Field(default=None, ge=0, le=1_000_000, strict=True)
    image_caption: str | None = Field(default=None, max_length=4000)
    facts: list[Annotated[str, StringConstraints(min_length=1, max_length=FACT_MAX)]] | None = (
        Field(default=None, max_length=200)
    )


# A session as a caller hands it over: its JSON, or a model (`SessionBody`, `SessionInput`).
RawSession = dict[str, Any] | BaseModel


class SessionBody(Strict):
    """A finished session: every turn needs text (or a caption, or pre-extracted facts)."""

    session_id: str = Field(
        min_length=1,
        max_length=256,
        description=SESSION_ID_RULE,
        json_schema_extra={
            "pattern": SESSION_ID,
            "allOf": [{"pattern": NOT_BLANK}],
            "not": {"enum": [".", ".."]},
        },
    )
    started_at: datetime = Field(
        description=f"{TIME_RANGE} once its offset is applied; a time without one is UTC"
    )
    participants: list[Name] = Field(
        min_length=1, max_length=50, json_schema_extra={"uniqueItems": True}
    )
    turns: list[TurnBody] = Field(
        min_length=1,
        max_length=MAX_TURNS,
        json_schema_extra={"contains": {"anyOf": [_HAS_TEXT, _HAS_FACTS]}},
    )
    seq: int | None = Field(
        default=None,
        ge=0,
        le=MAX_ORDER,
        strict=True,
        description="the session's order in its space",
    )

    _session_id = field_validator("session_id")(check_session_id)
    _started_at = field_validator("started_at")(check_time)

    _iso_text = field_validator("started_at", mode="before")(iso_text)

    @field_validator("turns")
    @classmethod
    def _texts(cls, turns: list[TurnBody]) -> list[TurnBody]:
        for i, turn in enumerate(turns):
            if not (not_blank(turn.text) or not_blank(turn.image_caption or "") or turn.facts):
                raise ValueError(f"turn {turn.id or i} has no text")
        return turns

    def check_limits(self, max_turns: int, max_text_chars: int) -> None:
        """The deployment's limits beyond the schema's (`api.max_turns`, `max_text_chars`)."""
        if len(self.turns) > max_turns:
            raise InvalidInput(f"{len(self.turns)} turns: at most {max_turns} per session")
        longest = max(len(t.text) for t in self.turns)
        if longest > max_text_chars:
            raise InvalidInput(f"a turn has {longest} characters: at most {max_text_chars}")

    def to_session(self) -> SessionInput:
        """The session as ingest takes it (its own checks: speakers, repeated turn ids)."""
        started, offset = self.started_at, None
        if started.tzinfo is not None:  # memory keeps naive UTC times, and the offset apart
            minutes = int((started.utcoffset() or timedelta()).total_seconds() // 60)
            offset = minutes or None
            started = started.astimezone(UTC).replace(tzinfo=None)
        return SessionInput(
            session_id=self.session_id,
            started_at=started,
            utc_offset=offset,
            participants=self.participants,
            turns=[Turn(**t.model_dump()) for t in self.turns],
            seq=self.seq,
        )


def _said(value: str | None) -> str | None:
    if value is not None and not not_blank(value):
        raise ValueError("must not be blank")
    return value


class FactCorrection(Strict):
    """A fact's corrected text (`PATCH /v1/spaces/{space}/facts/{fact_id}`), with why."""

    text: str = Field(
        min_length=1,
        max_length=FACT_MAX,
        description="the fact as it should read: one self-contained statement",
        json_schema_extra={"pattern": NOT_BLANK},
    )
    reason: str | None = Field(
        default=None,
        min_length=1,
        max_length=500,
        description="why it is corrected, kept in the fact's history",
        json_schema_extra={"pattern": NOT_BLANK},
    )

    _not_blank = field_validator("text", "reason")(_said)


class SearchFilters(Strict):
    """What a search may return: facts said in a time range, in given sessions, or naming
    given people (every filter set must hold). Pending turns are filtered alike, by their
    session's start."""

    after: datetime | None = Field(
        default=None,
        description="said at or after this time (ISO 8601, read as wall-clock time as session "
        "times are kept: an offset is dropped)",
    )
    before: datetime | None = Field(default=None, description="said at or before this time")
    session_ids: list[Annotated[str, Field(min_length=1, max_length=256)]] | None = Field(
        default=None, min_length=1, max_length=100, description="only facts of these sessions"
    )
    participants: list[Name] | None = Field(
        default=None, min_length=1, max_length=50, description="only facts naming these people"
    )

    @field_validator("after", "before", mode="before")
    @classmethod
    def _iso_text(cls, value: object) -> object:
        return value if value is None else iso_text(value)

    @field_validator("after", "before")
    @classmethod
    def _in_range(cls, value: datetime | None) -> datetime | None:
        return value if value is None else check_time(value)

    @field_validator("participants")
    @classmethod
    def _names(cls, value: list[str] | None) -> list[str] | None:
        return None if value is None else [person_name(p) for p in value]

    @property
    def empty(self) -> bool:
        return all(
            v is None for v in (self.after, self.before, self.session_ids, self.participants)
        )


ItemId = Annotated[str, Field(min_length=1, max_length=256)]


class ListingFilter(Strict):
    """Which items a listing of facts, events or profiles returns (every filter set must
    hold): a text's words, the sessions a fact came from, the events it belongs to, ids."""

    text: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="every word of it appears in the item's text (case ignored): a fact's "
        "text, an event's summary or keywords, a profile's person, keywords or the content "
        "of any of its versions",
    )
    session_ids: list[ItemId] | None = Field(
        default=None,
        min_length=1,
        max_length=100,
        description="facts these sessions produced, updated or repeated",
    )
    event_ids: list[ItemId] | None = Field(
        default=None, min_length=1, max_length=100, description="facts of these events"
    )
    ids: list[ItemId] | None = Field(
        default=None, min_length=1, max_length=200, description="only these items"
    )

    @field_validator("text")
    @classmethod
    def _has_words(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("give a word to look for, or leave it out")
        return value

    def check_listing(self, kind: str) -> None:
        """Refuse the filters only a listing of facts takes for another listing."""
        for name in ("session_ids", "event_ids"):
            if kind != "facts" and getattr(self, name) is not None:
                raise InvalidInput(f"{name}: only a listing of facts takes it, not of {kind}")

    @property
    def words(self) -> list[str]:
        return [] if self.text is None else self.text.casefold().split()

    @property
    def empty(self) -> bool:
        return all(v is None for v in (self.text, self.session_ids, self.event_ids, self.ids))


class Question(Strict):
    """A question and how recall should read memory for it (search, ask and context)."""

    question: str = Field(min_length=1, max_length=2000, json_schema_extra={"pattern": NOT_BLANK})
    k: int | None = Field(default=None, ge=1, le=100, strict=True)
    mode: RecallMode | None = None
    min_score: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        description="drop hits whose `relevance` is below this (default "
        "`retrieval.min_relevance`; 0 keeps every hit)",
    )
    filters: SearchFilters | None = None
    as_of: datetime | None = Field(
        default=None,
        description="when the question is asked (ISO 8601; default now): 'last week' is read "
        "from it and profiles are those in force then. Read as wall-clock time, as session "
        "times are kept",
    )

    @field_validator("question")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not not_blank(value):
            raise ValueError("the question is blank")
        return value

    @field_validator("as_of", mode="before")
    @classmethod
    def _iso_text(cls, value: object) -> object:
        return value if value is None else iso_text(value)

    @field_validator("as_of")
    @classmethod
    def _in_range(cls, value: datetime | None) -> datetime | None:
        return value if value is None else check_time(value)

    def recall(self) -> dict[str, Any]:
        """How to read memory for it, as `Memory.search`, `ask` and `context` take it."""
        return {
            "k": self.k,
            "mode": self.mode,
            "min_score": self.min_score,
            "filters": self.filters,
            "as_of": self.as_of,
        }


class QueryBody(Question):
    explain: bool = Field(
        default=False, strict=True, description="also return the recall graph (`graph`)"
    )


class ContextBody(Question):
    max_tokens: int = Field(
        default=CONTEXT_TOKENS,
        ge=50,
        le=32_000,
        strict=True,
        description="the block's budget, counted as characters / 4 (about a token each in "
        "English text): what does not fit is left out, lowest ranked first",
    )


class TenantCreate(Strict):
    name: str = Field(pattern=TENANT_NAME, description="lowercase letters, digits, '_', '-'")
