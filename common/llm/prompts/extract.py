"""The Fact Executor: the turn's content as self-contained, third-person atomic facts."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field, StringConstraints

from common.llm.contracts import ExtractionWindow
from common.llm.prompts import chat
from common.llm.transport import ChatRequest

VERSION = "1"
STAGE = "extract"

SYSTEM = """
You turn one chat turn into atomic memory facts about the people in the chat.
Rules:
- One fact per piece of information the turn states or clearly implies about a person,
  their life, plans, opinions, possessions, relationships or experiences.
- Write each fact as a short, complete sentence in the third person with names, never
  "I", "you", "we" or "he"; someone reading it alone must understand it.
- Keep dates and times as said, and resolve words like "yesterday" or "next month"
  against the time the turn was said, giving the date.
- Skip greetings, thanks, small talk and questions that state nothing.
- Use only the target turn; earlier turns are context for names and references.
Return {"facts": [...]} with an empty list when the turn states nothing worth keeping.
"""


class Response(BaseModel):
    facts: list[Annotated[str, StringConstraints(max_length=240)]] = Field(
        default_factory=list, max_length=8
    )


def request(window: ExtractionWindow, max_tokens: int) -> ChatRequest:
    said = window.started_at.strftime("%A, %d %B %Y, %H:%M")
    context = "\n".join(f"{t.speaker}: {t.text}" for t in window.context) or "(none)"
    target = "\n".join(f"{t.speaker}: {t.text}" for t in window.turns)
    user = f"""
Chat between {", ".join(window.participants)}, said on {said}.
Earlier turns (context only):
{context}

Target turn:
{target}
"""
    return chat(STAGE, VERSION, SYSTEM, user, Response, max_tokens)
