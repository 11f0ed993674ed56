"""Event routing (Algorithm 1): which similar facts describe the same happening."""

from __future__ import annotations

from pydantic import BaseModel, Field

from common.llm.contracts import FactView
from common.llm.prompts import chat, numbered
from common.llm.prompts.verify import line
from common.llm.transport import ChatRequest

VERSION = "1"
STAGE = "event_link"

SYSTEM = """
An event is one happening in someone's life (a trip, a move, a project, an illness, a
party) that several facts can describe. Given a new fact and numbered similar facts,
list the numbers of the facts that are about the same happening as the new fact: same
people, same occasion, compatible times. Similar topics at different times are different
happenings. Return {"same": []} when none is.
"""


class Response(BaseModel):
    same: list[int] = Field(default_factory=list, max_length=20)


def request(new: FactView, similar: list[FactView], max_tokens: int) -> ChatRequest:
    user = f"""
New fact: {line(new)}

Similar facts:
{numbered([line(s) for s in similar])}
"""
    return chat(STAGE, VERSION, SYSTEM, user, Response, max_tokens)
