"""Verification (§3.1.3): what the new fact adds over close stored facts, and what it updates."""

from __future__ import annotations

from pydantic import BaseModel, Field

from common.llm.contracts import FactView
from common.llm.prompts import chat, numbered
from common.llm.transport import ChatRequest
from common.text.timeanchor import describe

VERSION = "1"
STAGE = "verify"

SYSTEM = """
A new fact is about to be stored in a memory that already holds the numbered facts shown.
Decide:
- "store": false when the stored facts already say everything the new fact says;
- "residual": when the new fact repeats part of a stored fact, only the new part,
  rewritten as a complete sentence; "" to store the new fact as it is;
- "updates": stored facts the new fact corrects or supersedes (a changed job, city,
  plan or opinion, said later), each with its number and its corrected full text.
Facts that merely relate to each other are neither duplicates nor updates.
"""


class Update(BaseModel):
    number: int = Field(ge=1)
    text: str = Field(min_length=1, max_length=300)


class Response(BaseModel):
    store: bool = True
    residual: str = Field(default="", max_length=300)
    updates: list[Update] = Field(default_factory=list, max_length=3)


def line(fact: FactView) -> str:
    when = f"said {fact.time.session.date().isoformat()}"
    if fact.time.event is not None:
        when += f", about {describe(fact.time.event)}"
    return f"{fact.text} [{when}]"


def request(new: FactView, candidates: list[FactView], max_tokens: int) -> ChatRequest:
    user = f"""
Stored facts:
{numbered([line(c) for c in candidates])}

New fact: {line(new)}
"""
    return chat(STAGE, VERSION, SYSTEM, user, Response, max_tokens)
