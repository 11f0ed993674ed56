"""Event summary: one paragraph and keywords for the facts of an event."""

from __future__ import annotations

from pydantic import BaseModel, Field

from common.llm.contracts import EventSummary, FactView
from common.llm.prompts import Keyword, chat, numbered
from common.llm.prompts.verify import line
from common.llm.transport import ChatRequest

VERSION = "2"
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
    """`facts`: the event's members. With `previous` (the summary of the members in its
    `sources`), only the others are sent, to be folded into it: a revision reads what was
    added since, not the whole event again."""
    if previous is None:
        user = f"""
Facts of the happening:
{numbered([line(f) for f in facts])}
"""
    else:
        covered = set(previous.sources)
        added = [f for f in facts if f.id not in covered]
        user = f"""
Current summary of the happening: {previous.summary}

New facts of it, to fold into the summary:
{numbered([line(f) for f in added])}
"""
    return chat(STAGE, VERSION, SYSTEM, user, Response, max_tokens)
