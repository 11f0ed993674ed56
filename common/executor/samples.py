"""Teacher samples: one extraction window with the teacher's facts, as versioned JSONL records.

A sample is what one supervised example needs and where it came from: the instruction (the
Fact Executor's system prompt), the dialogue (the rendered window and the window itself, with
its session, turns and participants), the teacher's target facts and their provenance. Its id
is a uuid5 of tenant, source, session, target turn and prompt version, so a second `teach`
run knows what it wrote before and resumes after it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Literal, TypeVar

from pydantic import BaseModel, Field, ValidationError

from common.errors import InvalidInput
from common.llm.contracts import ExtractionWindow
from common.models import ids

SCHEMA: Literal["atommem.executor.sample"] = "atommem.executor.sample"
VERSION: Literal[1] = 1

M = TypeVar("M", bound=BaseModel)


class Source(BaseModel):
    """Where the dialogue came from: a sessions file or a stored space."""

    kind: Literal["file", "space"]
    name: str


class Provenance(BaseModel):
    """Who wrote the target facts, with which prompt, when, and at what cost."""

    teacher_model: str
    teacher_url: str
    prompt_stage: str
    prompt_version: str
    at: datetime
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str | None = None


class Sample(BaseModel):
    """One supervised example: the window's prompt in, the teacher's facts out."""

    schema_: Literal["atommem.executor.sample"] = Field(default=SCHEMA, alias="schema")
    version: Literal[1] = VERSION
    id: str
    tenant: str
    source: Source
    conversation: str = Field(description="the split key: no conversation in two splits")
    window: ExtractionWindow
    instruction: str = Field(description="the system prompt the teacher was given")
    prompt: str = Field(description="the user message: the dialogue context and target turn")
    facts: list[str] = Field(description="the teacher's target facts")
    provenance: Provenance

    model_config = {"populate_by_name": True}

    @property
    def turn_ids(self) -> list[str]:
        return [t.id or "" for t in self.window.turns]


def sample_id(tenant: str, source: Source, window: ExtractionWindow, prompt_version: str) -> str:
    turn = window.turns[-1].id or str(window.turns[-1].position)
    return ids.stable_id(
        tenant, "executor", source.kind, source.name, window.session_id, turn, prompt_version
    )


def append(path: Path, records: Sequence[BaseModel]) -> None:
    """Append records as JSON lines in one write, flushed: a run cut off keeps every line it
    finished."""
    if not records:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(r.model_dump_json(by_alias=True) + "\n" for r in records)
    with path.open("a", encoding="utf-8") as out:
        out.write(text)
        out.flush()


def _lines(path: Path) -> Iterator[tuple[int, dict[str, object]]]:
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                doc = json.loads(line)
            except json.JSONDecodeError:
                if line.endswith("\n"):
                    raise InvalidInput(f"{path}:{number}: not a JSON line") from None
                return  # the last line of a run that was cut off mid-write
            if not isinstance(doc, dict):
                raise InvalidInput(f"{path}:{number}: expected a JSON object")
            yield number, doc


def read_records(path: Path, model: type[M], schema: str) -> list[M]:
    """Every record of `schema` in a JSONL file, validated (none if the file is missing)."""
    if not path.exists():
        return []
    out = []
    for number, doc in _lines(path):
        if doc.get("schema") != schema:
            raise InvalidInput(f"{path}:{number}: not a {schema} record")
        try:
            out.append(model.model_validate(doc))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise InvalidInput(f"{path}:{number}: {where}: {first['msg']}") from None
    return out


def read_samples(path: Path) -> list[Sample]:
    """The samples of a file in the order written; a sample written twice counts once."""
    seen: dict[str, Sample] = {}
    for sample in read_records(path, Sample, SCHEMA):
        seen.setdefault(sample.id, sample)
    return list(seen.values())
