"""The benchmark's LLM judge (J): is a generated answer correct against the gold answer."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from common.llm.prompts import chat
from common.llm.transport import ChatRequest

VERSION = "1"
STAGE = "judge"

SYSTEM = """
Grade an answer to a question about a conversation against the gold answer. It is
CORRECT when it states the same fact as the gold answer, however worded, and a date in
another format or a period that contains the gold date counts; it is WRONG when it
contradicts, misses or only hedges. Be generous about wording, strict about content.
"""


class Response(BaseModel):
    verdict: Literal["CORRECT", "WRONG"]


def request(question: str, gold: str, answer: str, max_tokens: int) -> ChatRequest:
    user = f"""
Question: {question}
Gold answer: {gold}
Answer to grade: {answer}
"""
    return chat(STAGE, VERSION, SYSTEM, user, Response, max_tokens)
