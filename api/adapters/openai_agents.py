"""Memory for the OpenAI Agents SDK over AtomMem (`pip install 'atommem[openai-agents]'`).

    from agents import Agent, Runner
    from api.adapters.openai_agents import memory_tools, remember_conversation

    agent = Agent(name="support", tools=memory_tools(mem, "priya", user="Priya"))
    result = Runner.run_sync(agent, "Where do I live now?")
    remember_conversation(mem, "priya", result.to_input_list(), user="Priya")

`memory_tools` gives the agent two function tools: `recall`, which returns the context block
for a question (profiles in force, facts with their dates, events, what was said but not yet
processed, each line labelled to cite), and `remember`, which sends something the user said
as a message of theirs. `remember_conversation` sends a run's conversation (`to_input_list()`)
as plain messages: the user's and the assistant's text, tool calls and their output left out.
Memory builds facts from both in the background; until then `recall` shows them as turns not
yet processed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from agents import Tool, function_tool

from api.client import AtomMem
from common.models.jobs import Job
from common.models.query import CONTEXT_TOKENS


def memory_tools(
    mem: AtomMem, space: str, user: str = "User", max_tokens: int = CONTEXT_TOKENS
) -> list[Tool]:
    """`recall` and `remember`, bound to one person's space."""

    @function_tool
    def recall(question: str) -> str:
        """What memory holds about the user that bears on a question: their profiles in force,
        the facts with dates, the events they belong to, and what they said recently. Each
        line is labelled ([P1], [F1], ...) so the answer can cite it. Call it before answering
        anything about the user's life, plans or preferences.

        Args:
            question: the question to recall for, in the user's terms.
        """
        return mem.context(space, question, max_tokens=max_tokens).text

    @function_tool
    def remember(statement: str) -> str:
        """Keep something the user said about themselves (a fact, a plan, a preference) for
        later conversations, in their own words.

        Args:
            statement: what the user said, e.g. "I moved to Denver last month."
        """
        (job,) = mem.add_messages(space, [{"role": "user", "content": statement}], user=user)
        return f"kept (job {job.job_id}, {job.state})"

    return [recall, remember]


def remember_conversation(
    mem: AtomMem,
    space: str,
    items: Iterable[Any],
    user: str = "User",
    assistant: str = "Assistant",
    conversation_id: str | None = None,
) -> list[Job]:
    """Send a run's conversation (`RunResult.to_input_list()`) to memory as plain messages;
    the jobs of the sessions they make (none when no message has text)."""
    messages = [m for m in map(_message, items) if m is not None]
    if not messages:
        return []
    return mem.add_messages(space, messages, conversation_id, user, assistant)


def _message(item: Any) -> dict[str, str] | None:
    """A user or assistant message item as `{role, content}`; None for anything else."""
    if not isinstance(item, Mapping) or item.get("role") not in ("user", "assistant"):
        return None
    if item.get("type", "message") != "message":
        return None
    content = item.get("content")
    if isinstance(content, str):
        text = content
    else:  # a list of parts: input_text, output_text (images and files carry no text)
        text = "\n".join(
            str(part["text"])
            for part in content or ()
            if isinstance(part, Mapping) and part.get("type") in ("input_text", "output_text")
        )
    return {"role": str(item["role"]), "content": text} if text.strip() else None
