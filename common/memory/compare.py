"""Two spaces side by side: counts, the facts only one holds, profile differences per person,
and the memory versions that built each (for comparing a rebuild with its source)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence

from pydantic import BaseModel, Field

from common.models.memory import Event, Fact, MemoryVersion, Profile

_WORD = re.compile(r"\w+")
UNVERSIONED = "(none: written before memory versions)"


def normalised(text: str) -> str:
    """Lower case, words only: two wordings that differ in case, spacing or punctuation match."""
    return " ".join(_WORD.findall(text.lower()))


class SpaceSide(BaseModel):
    """What one space holds, for the comparison."""

    space: str
    counts: dict[str, int]
    versions: dict[str, dict[str, int]] = Field(
        description="version label -> records of each kind it built"
    )
    version_details: dict[str, MemoryVersion] = Field(default_factory=dict)


class ProfileDiff(BaseModel):
    person: str
    only_a: list[str]
    only_b: list[str]


class SpaceRecall(BaseModel):
    """One space's Recall@k by category on a question file, and its query latency."""

    recall: dict[str, float | None]
    questions: int
    p50_ms: float = Field(description="through the query worker")
    p50_in_task_ms: float


class RecallComparison(BaseModel):
    questions: str = Field(description="the question file")
    k: int
    mode: str
    spaces: dict[str, SpaceRecall]


class Comparison(BaseModel):
    a: SpaceSide
    b: SpaceSide
    facts_shared: int
    facts_only_a: int
    facts_only_b: int
    examples_only_a: list[str]
    examples_only_b: list[str]
    profiles: list[ProfileDiff]
    recall: RecallComparison | None = None


def versions_of(
    records: dict[str, Sequence[Fact | Event | Profile]],
) -> tuple[dict[str, dict[str, int]], dict[str, MemoryVersion]]:
    """Per version label, how many records of each kind it built; and each label's version."""
    counts: dict[str, Counter[str]] = {}
    details: dict[str, MemoryVersion] = {}
    for kind, items in records.items():
        for item in items:
            version = item.memory_version
            label = version.label if version is not None else UNVERSIONED
            if version is not None:
                details[label] = version
            counts.setdefault(label, Counter())[kind] += 1
    return {label: dict(c) for label, c in sorted(counts.items())}, details


def side(
    space: str,
    counts: dict[str, int],
    facts: Sequence[Fact],
    events: Sequence[Event],
    profiles: Sequence[Profile],
) -> SpaceSide:
    versions, details = versions_of({"facts": facts, "events": events, "profiles": profiles})
    return SpaceSide(space=space, counts=counts, versions=versions, version_details=details)


def _texts(items: Iterable[str]) -> dict[str, str]:
    """normalised -> the first wording seen."""
    out: dict[str, str] = {}
    for text in items:
        out.setdefault(normalised(text), text)
    return out


def profile_diffs(a: Sequence[Profile], b: Sequence[Profile]) -> list[ProfileDiff]:
    """Per person, the current profile contents only one side holds (matched normalised)."""
    people = sorted({p.person for p in a} | {p.person for p in b})
    diffs = []
    for person in people:
        mine = _texts(p.content for p in a if p.person == person)
        theirs = _texts(p.content for p in b if p.person == person)
        only_a = sorted(mine[k] for k in mine.keys() - theirs.keys())
        only_b = sorted(theirs[k] for k in theirs.keys() - mine.keys())
        if only_a or only_b:
            diffs.append(ProfileDiff(person=person, only_a=only_a, only_b=only_b))
    return diffs


def compare(
    a: SpaceSide,
    b: SpaceSide,
    facts_a: Sequence[Fact],
    facts_b: Sequence[Fact],
    profiles_a: Sequence[Profile],
    profiles_b: Sequence[Profile],
    show: int,
) -> Comparison:
    """Facts matched by normalised text (up to `show` examples of each side's own, in the
    order the space holds them), and the profile differences."""
    mine, theirs = _texts(f.text for f in facts_a), _texts(f.text for f in facts_b)
    only_a = [text for key, text in mine.items() if key not in theirs]
    only_b = [text for key, text in theirs.items() if key not in mine]
    return Comparison(
        a=a,
        b=b,
        facts_shared=len(mine.keys() & theirs.keys()),
        facts_only_a=len(only_a),
        facts_only_b=len(only_b),
        examples_only_a=only_a[:show],
        examples_only_b=only_b[:show],
        profiles=profile_diffs(profiles_a, profiles_b),
    )
