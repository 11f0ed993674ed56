"""Profile extraction (§3.3): lasting traits stated by the facts pending for profiles."""

from __future__ import annotations

from pydantic import BaseModel, Field

from common.llm.contracts import FactView
from common.llm.prompts import Keyword, chat, numbered
from common.llm.prompts.verify import line
from common.llm.transport import ChatRequest

VERSION = "1"
STAGE = "profile_extract"

SYSTEM = """
A profile is what stays true about a person for a while: job, home, family, health,
preferences, hobbies, beliefs, long-term goals. From the numbered facts, write each
lasting trait they state as one short third-person sentence naming the person, with the
number of the fact it comes from, the person, and up to 5 lowercase keywords. One-off
happenings are not traits. Return {"traits": []} when there is none.
"""


class Trait(BaseModel):
    number: int = Field(ge=1)
    person: str = Field(min_length=1, max_length=60)
    trait: str = Field(min_length=1, max_length=200)
    keywords: list[Keyword] = Field(default_factory=list, max_length=5)


class Response(BaseModel):
    traits: list[Trait] = Field(default_factory=list, max_length=8)


def request(facts: list[FactView], max_tokens: int) -> ChatRequest:
    user = f"""
Facts:
{numbered([f"{line(f)} (about: {', '.join(f.participants)})" for f in facts])}
"""
    return chat(STAGE, VERSION, SYSTEM, user, Response, max_tokens)
