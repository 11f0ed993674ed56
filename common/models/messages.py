"""Plain chat messages in, sessions out: what a chat backend holds (`[{role, content}]`, as
OpenAI's and mem0's APIs take them) cut into the finished sessions ingest takes.

`user` and `assistant` messages are turns; their speaker is the message's `name`, else the
body's `user` or `assistant` name. System and tool messages are instructions and tool output,
not dialogue, and are left out. A message without `created_at` takes the time of the message
before it (the first ones, that of the first message that has one, or the time the messages
were received). A pause longer than the gap between two messages starts a new session. Each
session's id comes from the conversation id and what its messages say, so the same messages
sent again are the same session (and the same job).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator
from pydantic.config import JsonDict

from common.models import ids
from common.models.api import (
    MAX_TEXT,
    MAX_TURNS,
    SESSION_ID,
    Name,
    SessionBody,
    Strict,
    TurnBody,
    check_session_id,
    check_time,
    iso_text,
)
from common.models.names import person_name
from common.models.session import NOT_BLANK, not_blank

DIALOGUE = ("user", "assistant")
# What the schema states of the rule `_has_dialogue` checks: some message is said by the user
# or the assistant and has content.
_SAID: JsonDict = {
    "required": ["role", "content"],
    "properties": {"role": {"enum": list(DIALOGUE)}, "content": {"pattern": NOT_BLANK}},
}


class ChatMessage(Strict):
    """One message of a chat, as a chat backend keeps it."""

    role: Literal["user", "assistant", "system", "tool"] = Field(
        description="`user` and `assistant` messages are remembered; `system` and `tool` ones "
        "are left out"
    )
    content: str = Field(max_length=MAX_TEXT)
    name: Name | None = Field(
        default=None, description="who said it (default: the body's `user` or `assistant`)"
    )
    created_at: datetime | None = Field(
        default=None,
        description="when it was said (ISO 8601; default: the message before it, or the time "
        "the messages were received)",
    )

    _iso_text = field_validator("created_at", mode="before")(iso_text)

    @field_validator("created_at")
    @classmethod
    def _in_range(cls, value: datetime | None) -> datetime | None:
        return None if value is None else check_time(value)

    def said(self) -> bool:
        return self.role in DIALOGUE and not_blank(self.content)


class MessagesBody(Strict):
    """A chat's messages in order, with who the user and the assistant are."""

    messages: list[ChatMessage] = Field(
        min_length=1,
        max_length=MAX_TURNS,
        json_schema_extra={"contains": _SAID},
    )
    conversation_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="names the conversation; its sessions' ids start with it",
        json_schema_extra={
            "pattern": SESSION_ID,
            "allOf": [{"pattern": NOT_BLANK}],
            "not": {"enum": [".", ".."]},
        },
    )
    user: Name = Field(default="User", description="the name `user` messages are said by")
    assistant: Name = Field(
        default="Assistant", description="the name `assistant` messages are said by"
    )

    @field_validator("conversation_id")
    @classmethod
    def _conversation_id(cls, value: str | None) -> str | None:
        return None if value is None else check_session_id(value)

    @model_validator(mode="after")
    def _has_dialogue(self) -> MessagesBody:
        if not any(m.said() for m in self.messages):
            raise ValueError("no user or assistant message has content")
        return self

    def speaker(self, message: ChatMessage) -> str:
        return message.name or (self.user if message.role == "user" else self.assistant)

    def sessions(self, received: datetime, gap: timedelta) -> list[Received]:
        """The sessions these messages make, in order."""
        said = [m for m in self.messages if m.said()]
        given = next((m.created_at for m in said if m.created_at is not None), None)
        at = given or received  # as written, with its offset: "yesterday" is read in it
        pieces: list[list[tuple[ChatMessage, datetime]]] = []
        for message in said:
            when = message.created_at or at
            if not pieces or _utc(when) - _utc(at) > gap:
                pieces.append([])
            pieces[-1].append((message, when))
            at = when
        return [self._session(piece, given is None) for piece in pieces]

    def _session(self, piece: list[tuple[ChatMessage, datetime]], timeless: bool) -> Received:
        speakers = [person_name(self.speaker(m)) for m, _ in piece]
        said = [
            {"speaker": s, "text": m.content, "at": m.created_at and _utc(m.created_at).isoformat()}
            for s, (m, _) in zip(speakers, piece, strict=True)
        ]
        digest = ids.content_hash({"conversation": self.conversation_id, "messages": said})
        body = SessionBody(
            session_id=f"{self.conversation_id or 'chat'}-{digest[:16]}",
            started_at=piece[0][1],
            participants=list(dict.fromkeys(speakers)),
            turns=[
                TurnBody(speaker=s, text=m.content)
                for s, (m, _) in zip(speakers, piece, strict=True)
            ],
        )
        return Received(body=body, timeless=timeless)


class Received(Strict):
    """A session cut from messages; `timeless` when no message gave a time, so its start is
    when it was received (sent again, it is the same session at another time)."""

    body: SessionBody
    timeless: bool


def _utc(value: datetime) -> datetime:
    return value.astimezone(UTC) if value.tzinfo is not None else value.replace(tzinfo=UTC)


# Messages as a caller hands them over: their JSON, or `ChatMessage`s.
RawMessages = Sequence[ChatMessage | Mapping[str, Any]]


def messages_body(
    messages: RawMessages,
    conversation_id: str | None = None,
    user: str | None = None,
    assistant: str | None = None,
) -> dict[str, Any]:
    """The JSON body of `POST .../messages` from a verb's arguments (unset ones left out)."""
    body: dict[str, Any] = {
        "messages": [
            m.model_dump(mode="json", exclude_none=True) if isinstance(m, ChatMessage) else m
            for m in messages
        ]
    }
    given = {"conversation_id": conversation_id, "user": user, "assistant": assistant}
    return body | {k: v for k, v in given.items() if v is not None}
