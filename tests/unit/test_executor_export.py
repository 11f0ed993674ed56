"""The review log and `atommem executor export`: the four duties turn teacher facts into
training targets, decisions are counted, and train and validation share no conversation."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest
from pydantic import ValidationError

from common.errors import InvalidInput
from common.executor import dataset, review
from common.executor.review import FactDecision, Verdict
from common.executor.samples import Provenance, Sample, Source, append, read_samples
from common.llm.contracts import ExtractionWindow
from common.models.session import Turn
from tests.helpers.cli import run

AT = datetime(2024, 5, 1, 12, 0)


def sample(conversation: str, turn: int, facts: list[str]) -> Sample:
    window = ExtractionWindow(
        session_id="s1",
        started_at=AT,
        participants=["Ann", "Bob"],
        turns=[Turn(id=f"s1:{turn}", speaker="Ann", text=f"turn {turn}")],
    )
    return Sample(
        id=f"{conversation}-{turn}",
        tenant="default",
        source=Source(kind="file", name=f"{conversation}.json"),
        conversation=conversation,
        window=window,
        instruction="Extract facts.",
        prompt=f"Target turn:\nAnn: turn {turn}",
        facts=facts,
        provenance=Provenance(
            teacher_model="t",
            teacher_url="http://x/v1",
            prompt_stage="extract",
            prompt_version="1",
            at=AT,
        ),
    )


def accept_all(s: Sample, reviewer: str = "rita") -> Verdict:
    return Verdict(
        facts=[FactDecision(action="accept", texts=[f]) for f in s.facts], reviewer=reviewer
    )


def test_the_four_duties_make_the_targets(tmp_path: Path) -> None:
    path = tmp_path / "samples.jsonl"
    s = sample("c1", 1, ["Ann has a cat.", "Ann lives in Oslo and works at a bank.", "Ann hm", "x"])
    append(path, [s])
    verdict = Verdict(
        facts=[
            FactDecision(action="accept", texts=["Ann has a cat."]),
            FactDecision(action="split", texts=["Ann lives in Oslo.", "Ann works at a bank."]),
            FactDecision(action="edit", texts=["Ann likes jazz."]),
            FactDecision(action="drop"),
        ],
        reviewer="rita",
    )
    review.record(path, review.decide(s, accept_all(s, "sam"), AT))
    review.record(path, review.decide(s, verdict, AT))  # the later decision supersedes
    last, logged = review.latest(path)
    assert logged == 2 and review.decisions_path(path).name == "samples.decisions.jsonl"
    assert review.reviewed_facts(last[s.id]) == [
        "Ann has a cat.",
        "Ann lives in Oslo.",
        "Ann works at a bank.",
        "Ann likes jazz.",
    ]
    summary = review.summarize(read_samples(path), last, logged)
    assert summary.actions == {"accept": 1, "edit": 1, "drop": 1, "split": 1}
    assert (summary.reviewed, summary.decisions, summary.reviewers) == (1, 2, {"rita": 1})


def test_a_decision_must_fit_its_sample() -> None:
    s = sample("c1", 1, ["Ann has a cat."])
    with pytest.raises(InvalidInput, match="has 1 facts; the decision covers 0"):
        review.decide(s, Verdict(facts=[], reviewer="rita"))
    changed = Verdict(facts=[FactDecision(action="accept", texts=["Ann has a dog."])], reviewer="r")
    with pytest.raises(InvalidInput, match="use edit"):
        review.decide(s, changed)
    with pytest.raises(ValidationError, match="split takes 2-8 texts, got 1"):
        FactDecision(action="split", texts=["one"])
    with pytest.raises(ValidationError, match="drop takes 0-0 texts"):
        FactDecision(action="drop", texts=["one"])


def test_train_and_validation_share_no_conversation(tmp_path: Path) -> None:
    path = tmp_path / "samples.jsonl"
    samples = [sample(f"c{c}", t, [f"Fact {c}.{t}."]) for c in range(10) for t in range(3)]
    append(path, samples)
    for s in samples[:-3]:  # the last conversation unreviewed
        review.record(path, review.decide(s, accept_all(s), AT))
    excluded = Verdict(facts=[FactDecision(action="drop")], excluded=True, reviewer="rita")
    review.record(path, review.decide(samples[0], excluded, AT))
    last, logged = review.latest(path)
    splits, stats = dataset.build(samples, last, logged, 0.2, "seed")
    train = {r.conversation for r in splits["train"]}
    validation = {r.conversation for r in splits["validation"]}
    assert validation and train and not train & validation
    assert train | validation == {f"c{c}" for c in range(9)}
    assert stats.splits["train"].samples + stats.splits["validation"].samples == 26
    assert (stats.unreviewed, stats.review.excluded, stats.review.decisions) == (3, 1, 28)
    record = splits["train"][0]
    assert [m["role"] for m in record.messages] == ["system", "user", "assistant"]
    assert json.loads(record.messages[-1]["content"]) == {
        "facts": [f"Fact {record.conversation[1:]}.{record.sample_id[-1]}."]
    }
    # the same seed keeps each conversation on its side when more is reviewed
    for s in samples[-3:]:
        review.record(path, review.decide(s, accept_all(s), AT))
    last, logged = review.latest(path)
    more, _ = dataset.build(samples, last, logged, 0.2, "seed")
    assert validation <= {r.conversation for r in more["validation"]}


def test_one_conversation_validates_nothing_and_says_so() -> None:
    s = sample("only", 1, [])
    last = {s.id: review.decide(s, Verdict(facts=[], reviewer="rita"), AT)}
    splits, stats = dataset.build([s], last, 1, 0.1, "seed")
    assert len(splits["train"]) == 1 and splits["validation"] == []
    assert stats.splits["train"].empty == 1
    assert stats.note is not None and "one conversation" in stats.note


def test_export_writes_the_files_or_says_what_is_missing(tmp_path: Path) -> None:
    path = tmp_path / "samples.jsonl"
    out = tmp_path / "sft"
    none = run(tmp_path, "executor", "export", "--samples", str(path), "--out", str(out))
    assert none.returncode == 2 and "no samples (run `atommem executor teach` first)" in none.stderr
    samples = [sample(f"c{c}", 1, ["Ann has a cat."]) for c in range(4)]
    append(path, samples)
    unreviewed = run(tmp_path, "executor", "export", "--samples", str(path), "--out", str(out))
    assert unreviewed.returncode == 2
    assert "no reviewed samples to export (4 samples, 0 reviewed" in unreviewed.stderr
    for s in samples:
        review.record(path, review.decide(s, accept_all(s), AT))
    args = ["executor", "export", "--samples", str(path), "--out", str(out), "--validation", "0.25"]
    done = run(tmp_path, *args, "--json")
    assert done.returncode == 0, done.stderr
    stats = json.loads(done.stdout)
    assert (stats["splits"]["train"]["samples"], stats["splits"]["validation"]["samples"]) == (3, 1)
    assert stats["review"]["actions"]["accept"] == 4
    assert len((out / "train.jsonl").read_text().splitlines()) == 3
    assert json.loads((out / "stats.json").read_text()) == stats
