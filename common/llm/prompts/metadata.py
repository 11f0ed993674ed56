"""Metadata of facts: who each is about, its keywords, the time it refers to, lasting trait."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from common.llm.prompts import Keyword, Name, chat, json_schema, numbered
from common.llm.transport import ChatRequest

VERSION = "1"
STAGE = "metadata"

SYSTEM = """
For each numbered fact from a chat, give:
- "people": the chat participants the fact is about (names from the list given);
- "keywords": up to 5 lowercase content words or short phrases that identify it;
- "start"/"end": the calendar days (YYYY-MM-DD) the fact's event happened or will happen,
  resolved against the date the fact was said; "" when the fact names no time;
- "lasting": true when it states a lasting trait of a person (job, home, family, health,
  preference, hobby, belief, long-term goal), false for one-off happenings.
Return {"items": [...]} with exactly one item per fact, in order.
"""


class Item(BaseModel):
    people: list[Name] = Field(default_factory=list, max_length=6)
    keywords: list[Keyword] = Field(default_factory=list, max_length=5)
    start: str = Field(default="", max_length=10)
    end: str = Field(default="", max_length=10)
    lasting: bool = False


class Response(BaseModel):
    items: list[Item]


def request(
    texts: list[str], speaker: str, participants: list[str], said_at: datetime, max_tokens: int
) -> ChatRequest:
    schema = json_schema(Response)
    schema["properties"]["items"] |= {"minItems": len(texts), "maxItems": len(texts)}
    user = f"""
Participants: {", ".join(participants)}. Speaker of these facts: {speaker}.
Said on {said_at.strftime("%A, %Y-%m-%d")}.
Facts:
{numbered(texts)}
"""
    return chat(STAGE, VERSION, SYSTEM, user, Response, max_tokens, schema=schema)
