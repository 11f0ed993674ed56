"""Answers from retrieved memory, in the style the question's intent chose."""

from __future__ import annotations

from pydantic import BaseModel, Field

from common.llm.contracts import AnswerStyle, EvidenceItem
from common.llm.prompts import chat, numbered
from common.llm.transport import ChatRequest
from common.text.timeanchor import describe

VERSION = "2"
STAGE = "answer"

COMMON = """
Answer a question about people from numbered memory facts. Use only those facts; when
they do not answer it, say that memory does not say. A fact marked "in force" is how things
stand when the question is asked: lead with it, and mention an older fact it replaced only
with that fact's date. Give the numbers of the facts you used in "evidence".
"""

STYLES: dict[str, str] = {
    "factual": "Answer in a few words or one short sentence: the name, thing or number asked.",
    "temporal": (
        "The question asks when. Answer with the date or period from the facts (each "
        "fact shows when it was said and what time it is about), e.g. '7 May 2023' or "
        "'the week before 9 June 2023'."
    ),
    "open": (
        "The question asks for an inference or opinion. Reason from the facts and the "
        "person's traits, and answer in one or two sentences starting with the conclusion."
    ),
}


class Response(BaseModel):
    answer: str = Field(min_length=1, max_length=500)
    evidence: list[int] = Field(default_factory=list, max_length=10)


def line(item: EvidenceItem) -> str:
    if item.in_force_since is not None:
        return f"{item.text} [in force, since {item.in_force_since.isoformat()}]"
    if item.time is None:
        return item.text
    when = f"said {item.time.session.date().isoformat()}"
    if item.time.event is not None:
        when += f", about {describe(item.time.event)}"
    return f"{item.text} [{when}]"


def request(
    question: str, style: AnswerStyle, evidence: list[EvidenceItem], max_tokens: int
) -> ChatRequest:
    user = f"""
Facts:
{numbered([line(e) for e in evidence])}

Question: {question}
"""
    return chat(STAGE, VERSION, COMMON + STYLES[style], user, Response, max_tokens)
