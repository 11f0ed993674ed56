"""A search's reply as a block to place in a prompt: the profiles in force, the ranked facts
with their dates and sessions, the summaries of the events recall used, and the turns not yet
processed, each line labelled (`[P1]`, `[F1]`, `[E1]`, `[T1]`) so an answer can cite it, within
a budget of tokens counted as characters / 4.

What fits is chosen in that order of sections and, within one, by rank: a profile in force
outranks any fact, a fact any event summary. A line that does not fit is left out and the
next ones are still tried, so one long line does not cost the shorter ones after it."""

from __future__ import annotations

import math
from datetime import datetime

from common.models.memory import FactTime
from common.models.query import ContextItem, ContextResponse, SearchResponse

CHARS_PER_TOKEN = 4  # English text on the common BPE tokenizers: about four characters each
NOTHING = "Memory holds nothing relevant to this question."
SECTIONS = {
    "profile": "Profiles in force then:",
    "fact": "Facts, most relevant first:",
    "event": "Events these facts belong to:",
    "pending": "Said recently, not yet processed:",
}
LABELS = {"profile": "P", "fact": "F", "event": "E", "pending": "T"}


def tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def days(time: FactTime) -> str:
    """When a fact happened, when known, else the day it was said."""
    span = time.event
    if span is None:
        return time.session.date().isoformat()
    if span.start == span.end:
        return span.start.isoformat()
    return f"{span.start.isoformat()} to {span.end.isoformat()}"


def candidates(found: SearchResponse) -> list[ContextItem]:
    """Every line the block could hold, in the order they are offered to the budget."""
    items: list[ContextItem] = []
    for p in found.profiles:
        items.append(
            ContextItem(
                label="", kind="profile", id=p.profile_id, text=p.content,
                when=p.valid_from.isoformat(),
            )
        )  # fmt: skip
    for h in found.hits:
        items.append(
            ContextItem(
                label="", kind="fact", id=h.fact_id, text=h.text, session_id=h.session_id,
                turn_ids=h.turn_ids, when=days(h.time), relevance=round(h.relevance, 3),
            )
        )  # fmt: skip
    for e in found.events:
        if e.summary.strip():
            items.append(ContextItem(label="", kind="event", id=e.event_id, text=e.summary))
    for t in found.pending:
        items.append(
            ContextItem(
                label="", kind="pending", id=f"pending:{t.session_id}:{t.turn_id}",
                text=f"{t.speaker}: {t.text}", session_id=t.session_id, turn_ids=[t.turn_id],
                when=t.time.date().isoformat(), relevance=round(t.score, 3),
            )
        )  # fmt: skip
    return items


def line(item: ContextItem) -> str:
    if item.kind == "profile":
        return f"[{item.label}] {item.text} (since {item.when})"
    if item.kind == "event":
        return f"[{item.label}] {item.text}"
    return f"[{item.label}] {item.when}, session {item.session_id}: {item.text}"


def compose(found: SearchResponse, as_of: datetime, max_tokens: int) -> ContextResponse:
    """The block for `found`, read at `as_of`, in at most `max_tokens` (the header always)."""
    header = f"Memory for: {found.question}\nAs of {as_of.date().isoformat()}."
    text = header
    kept: list[ContextItem] = []
    counts = dict.fromkeys(LABELS, 0)
    left_out = 0
    section = ""
    for item in candidates(found):
        label = f"{LABELS[item.kind]}{counts[item.kind] + 1}"
        item = item.model_copy(update={"label": label})
        heading = f"\n\n{SECTIONS[item.kind]}" if item.kind != section else ""
        grown = f"{text}{heading}\n{line(item)}"
        if tokens(grown) > max_tokens:
            left_out += 1
            continue
        text, section = grown, item.kind
        counts[item.kind] += 1
        kept.append(item)
    if not kept:
        text = f"{header}\n{NOTHING}"
    return ContextResponse(
        question=found.question,
        as_of=as_of,
        text=text,
        tokens=tokens(text),
        max_tokens=max_tokens,
        items=kept,
        left_out=left_out,
    )
