"""Profile temporal update (§3.3): how a new trait relates to a person's stored profiles."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from common.llm.contracts import ProfileCandidate, ProfileView
from common.llm.prompts import chat, numbered
from common.llm.transport import ChatRequest

VERSION = "1"
STAGE = "profile_update"

SYSTEM = """
A person's profile entries each hold since a date. A new trait arrives, valid from its own
date. Choose one action:
- "redundant": an entry already says it (give its number);
- "update_current": it changes an entry and is newer, so it becomes that entry's
  current version (give the number and the new text);
- "modify_history": it changes an entry but is older than that entry's current version,
  so it belongs to the entry's history (give the number and the text);
- "create": it is about something no entry covers (number 0).
"""


class Response(BaseModel):
    action: Literal["redundant", "update_current", "modify_history", "create"]
    number: int = Field(default=0, ge=0)
    text: str = Field(default="", max_length=300)


def request(
    candidate: ProfileCandidate, existing: list[ProfileView], max_tokens: int
) -> ChatRequest:
    entries = [f"{p.content} [since {p.t_from.date().isoformat()}]" for p in existing]
    user = f"""
Person: {candidate.person}
Profile entries:
{numbered(entries)}

New trait: {candidate.content} [from {candidate.valid_from.date().isoformat()}]
"""
    return chat(STAGE, VERSION, SYSTEM, user, Response, max_tokens)
