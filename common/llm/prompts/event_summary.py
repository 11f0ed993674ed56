"""Event summary: one paragraph and keywords for the facts of an event."""

from __future__ import annotations

from pydantic import BaseModel, Field

from common.llm.contracts import EventSummary, FactView
from common.llm.prompts import Keyword, chat, numbered
from common.llm.prompts.verify import line
from common.llm.transport import ChatRequest

VERSION = "1"
STAGE = "event_summary"

SYSTEM = """
Summarise one happening from the facts that describe it, in at most three sentences:
who, what, where and when (with dates), in the third person. Keep every specific name,
number and date; invent nothing. Also give up to 6 lowercase keywords.
"""


class Response(BaseModel):
    summary: str = Field(min_length=1, max_length=600)
    keywords: list[Keyword] = Field(default_factory=list, max_length=6)


def request(facts: list[FactView], previous: EventSummary | None, max_tokens: int) -> ChatRequest:
    before = f"\nCurrent summary, to revise: {previous.summary}\n" if previous else ""
    user = f"""
Facts of the happening:
{numbered([line(f) for f in facts])}
{before}"""
    return chat(STAGE, VERSION, SYSTEM, user, Response, max_tokens)
