"""Stage 3 of the Fact Executor's SFT: reviewed samples as a chat-format dataset.

Each record is the conversation the served executor has: the system prompt, the user
message with the dialogue, and the answer it should give, `{"facts": [...]}` as JSON, the
reviewed facts. Samples split into train and validation by conversation, never a
conversation in both: which conversations validate is fixed by a hash of their names and a
seed, so a re-export after more review keeps every conversation on its side (but for the
smallest sets, where one conversation is moved to keep both sides non-empty).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from pydantic import BaseModel, Field

from common.errors import InvalidInput
from common.executor.review import Decision, Summary, reviewed_facts, summarize
from common.executor.samples import Sample

SPLITS = ("train", "validation")


class ChatRecord(BaseModel):
    """One SFT example in the chat format SFT tools read (`messages`)."""

    messages: list[dict[str, str]]
    sample_id: str
    conversation: str


class SplitStats(BaseModel):
    samples: int
    conversations: list[str]
    facts: int
    empty: int = Field(description="samples whose answer is no fact")


class ExportStats(BaseModel):
    """What went where, and the review behind it."""

    splits: dict[str, SplitStats]
    validation_share: float
    seed: str
    unreviewed: int
    review: Summary
    note: str | None = None


def answer(facts: list[str]) -> str:
    """The executor's answer as the extract stage parses it."""
    return json.dumps({"facts": facts}, ensure_ascii=False)


def chat_record(sample: Sample, facts: list[str]) -> ChatRecord:
    return ChatRecord(
        messages=[
            {"role": "system", "content": sample.instruction},
            {"role": "user", "content": sample.prompt},
            {"role": "assistant", "content": answer(facts)},
        ],
        sample_id=sample.id,
        conversation=sample.conversation,
    )


def _draw(conversation: str, seed: str) -> float:
    """The conversation's place in [0, 1), fixed by its name and the seed."""
    digest = hashlib.sha256(f"{seed}/{conversation}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def validation_conversations(conversations: set[str], share: float, seed: str) -> set[str]:
    """The conversations whose draw falls under `share`: a conversation's side depends on
    its name alone, so more conversations never move one across. With share > 0 and at
    least two conversations, at least one validates and at least one trains."""
    if share <= 0 or len(conversations) < 2:
        return set()
    ranked = sorted(conversations, key=lambda c: _draw(c, seed))
    held = {c for c in ranked if _draw(c, seed) < share}
    if not held:
        held = {ranked[0]}
    if len(held) == len(ranked):
        held.discard(ranked[-1])
    return held


def build(
    samples: list[Sample], last: dict[str, Decision], logged: int, share: float, seed: str
) -> tuple[dict[str, list[ChatRecord]], ExportStats]:
    """The reviewed, not excluded samples as chat records per split, with statistics."""
    kept: list[tuple[Sample, list[str]]] = []
    for sample in samples:
        decision = last.get(sample.id)
        facts = reviewed_facts(decision) if decision is not None else None
        if facts is not None:
            kept.append((sample, facts))
    review = summarize(samples, last, logged)
    if not kept:
        raise InvalidInput(
            f"no reviewed samples to export ({review.samples} samples, {review.reviewed} "
            f"reviewed, {review.excluded} excluded): review them in the inspector first "
            "(docs/inspector.md, 'Review')"
        )
    held_out = validation_conversations({s.conversation for s, _ in kept}, share, seed)
    splits: dict[str, list[ChatRecord]] = {name: [] for name in SPLITS}
    for sample, facts in kept:
        side = "validation" if sample.conversation in held_out else "train"
        splits[side].append(chat_record(sample, facts))
    stats = {
        name: SplitStats(
            samples=len(records),
            conversations=sorted({r.conversation for r in records}),
            facts=sum(len(json.loads(r.messages[-1]["content"])["facts"]) for r in records),
            empty=sum(json.loads(r.messages[-1]["content"])["facts"] == [] for r in records),
        )
        for name, records in splits.items()
    }
    note = None
    if share > 0 and not held_out:
        note = (
            "every reviewed sample comes from one conversation, so none is held out for "
            "validation: teach and review a second conversation to validate on"
        )
    return splits, ExportStats(
        splits=stats,
        validation_share=share,
        seed=seed,
        unreviewed=review.samples - review.reviewed,
        review=review,
        note=note,
    )


def write(out: Path, splits: dict[str, list[ChatRecord]], stats: ExportStats) -> None:
    """`train.jsonl`, `validation.jsonl` and `stats.json` in `out`, each replaced whole."""
    out.mkdir(parents=True, exist_ok=True)
    for name, records in splits.items():
        part = out / f"{name}.jsonl.part"
        part.write_text("".join(r.model_dump_json() + "\n" for r in records), encoding="utf-8")
        part.replace(out / f"{name}.jsonl")
    (out / "stats.json").write_text(stats.model_dump_json(indent=1) + "\n", encoding="utf-8")


def read_split(path: Path) -> list[ChatRecord]:
    if not path.exists():
        raise InvalidInput(f"{path}: no such dataset file (run `atommem executor export`)")
    lines = path.read_text(encoding="utf-8").splitlines()
    return [ChatRecord.model_validate_json(line) for line in lines if line.strip()]
