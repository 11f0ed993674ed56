"""A person's review of teacher samples: an append-only log of decisions beside the samples.

The paper's four duties, per teacher fact: accept it as written (verify), edit it (refine),
drop it (filter) or split it into several atomic facts (decompose). A decision covers one
sample, every one of its facts, and names its reviewer and time; a later decision on the same
sample supersedes the earlier one, which stays in the log. A sample whose context is unusable
is excluded whole. The facts a reviewed sample trains on are its accepted, edited and split
texts in the teacher's order.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, Field, StringConstraints, model_validator

from common.errors import InvalidInput
from common.executor.samples import Sample, append, read_records

SCHEMA: Literal["atommem.executor.decision"] = "atommem.executor.decision"
VERSION: Literal[1] = 1
ACTIONS = ("accept", "edit", "drop", "split")

Action = Literal["accept", "edit", "drop", "split"]
FactText = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=240)]


class FactDecision(BaseModel):
    """What became of one teacher fact."""

    action: Action
    texts: list[FactText] = Field(
        default_factory=list, max_length=8, description="the fact's text after review"
    )

    @model_validator(mode="after")
    def _texts_fit(self) -> FactDecision:
        wanted = {"accept": (1, 1), "edit": (1, 1), "drop": (0, 0), "split": (2, 8)}
        low, high = wanted[self.action]
        if not low <= len(self.texts) <= high:
            raise ValueError(f"{self.action} takes {low}-{high} texts, got {len(self.texts)}")
        return self


class Verdict(BaseModel):
    """A reviewer's decision on a sample, as the inspector sends it."""

    facts: list[FactDecision] = Field(default_factory=list)
    excluded: bool = Field(default=False, description="the whole sample left out of training")
    reviewer: str = Field(min_length=1, max_length=128)


class Decision(Verdict):
    """A verdict as logged: on which sample, when."""

    schema_: Literal["atommem.executor.decision"] = Field(default=SCHEMA, alias="schema")
    version: Literal[1] = VERSION
    sample_id: str
    at: datetime

    model_config = {"populate_by_name": True}


class Summary(BaseModel):
    """How far the review has come, and what it decided."""

    samples: int
    reviewed: int
    excluded: int
    decisions: int = Field(description="decisions logged, superseded ones included")
    actions: dict[str, int] = Field(description="per fact, in the latest decisions")
    reviewers: dict[str, int] = Field(description="samples each reviewer decided last")


def decisions_path(samples: Path) -> Path:
    """The decision log beside a samples file: `x.jsonl` -> `x.decisions.jsonl`."""
    return samples.with_name(f"{samples.stem}.decisions.jsonl")


def decide(sample: Sample, verdict: Verdict, at: datetime | None = None) -> Decision:
    """A verdict checked against its sample: one decision per teacher fact, an accepted fact
    kept word for word."""
    if len(verdict.facts) != len(sample.facts):
        raise InvalidInput(
            f"sample {sample.id} has {len(sample.facts)} facts; the decision covers "
            f"{len(verdict.facts)}"
        )
    for i, (fact, decision) in enumerate(zip(sample.facts, verdict.facts, strict=True)):
        if decision.action == "accept" and decision.texts != [fact.strip()]:
            raise InvalidInput(f"fact {i + 1} is accepted but its text changed: use edit")
    return Decision(**verdict.model_dump(), sample_id=sample.id, at=at or datetime.now(UTC))


def record(samples: Path, decision: Decision) -> None:
    append(decisions_path(samples), [decision])


def latest(samples: Path) -> tuple[dict[str, Decision], int]:
    """The latest decision of every reviewed sample, and how many the log holds."""
    log = read_records(decisions_path(samples), Decision, SCHEMA)
    last: dict[str, Decision] = {}
    for decision in log:
        last[decision.sample_id] = decision
    return last, len(log)


def reviewed_facts(decision: Decision) -> list[str] | None:
    """The facts a sample trains on after review; None when it is excluded."""
    if decision.excluded:
        return None
    return [text for fact in decision.facts for text in fact.texts]


def summarize(samples: list[Sample], last: dict[str, Decision], logged: int) -> Summary:
    known = {s.id for s in samples}
    current = [d for sid, d in last.items() if sid in known]
    actions: Counter[str] = Counter({a: 0 for a in ACTIONS})
    for decision in current:
        if not decision.excluded:
            actions.update(f.action for f in decision.facts)
    return Summary(
        samples=len(samples),
        reviewed=len(current),
        excluded=sum(d.excluded for d in current),
        decisions=logged,
        actions=dict(actions),
        reviewers=dict(Counter(d.reviewer for d in current)),
    )
