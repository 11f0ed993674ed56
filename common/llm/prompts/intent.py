"""Query intent (§5): who and when a question is about, its keywords, profiles, answer style."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from common.llm.prompts import Keyword, Name, chat
from common.llm.transport import ChatRequest

VERSION = "1"
STAGE = "intent"

SYSTEM = """
Analyse a question asked of a memory of chats between the participants listed.
Give:
- "people": the participants the question is about (names from the list);
- "keywords": up to 6 lowercase content words that the answer's facts would contain;
- "start"/"end": the calendar days (YYYY-MM-DD) the question restricts to, resolved
  against today's date; "" when it names no time;
- "profile": true when lasting traits (job, preferences, personality, habits) would help;
- "style": "temporal" when it asks when something happened, "open" when it asks for an
  inference, opinion or hypothetical, otherwise "factual".
"""


class Response(BaseModel):
    people: list[Name] = Field(default_factory=list, max_length=6)
    keywords: list[Keyword] = Field(default_factory=list, max_length=6)
    start: str = Field(default="", max_length=10)
    end: str = Field(default="", max_length=10)
    profile: bool = False
    style: Literal["factual", "temporal", "open"] = "factual"


def request(question: str, participants: list[str], now: datetime, max_tokens: int) -> ChatRequest:
    user = f"""
Participants: {", ".join(participants) or "(unknown)"}. Today: {now.strftime("%A, %Y-%m-%d")}.
Question: {question}
"""
    return chat(STAGE, VERSION, SYSTEM, user, Response, max_tokens)
