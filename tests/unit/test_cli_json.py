"""`search --json` and `ask --json` print all the text output shows, pending turns included."""

from __future__ import annotations

import json
from datetime import datetime

import pytest

from cli.main import build_parser
from cli.output import show_answer, show_search
from common.models.query import AskResponse, PendingTurn, QueryIntent, SearchResponse

TURN = PendingTurn(
    session_id="s9",
    turn_id="s9:2",
    position=2,
    speaker="Ann",
    text="I moved to Oslo.",
    time=datetime(2024, 6, 1),
    score=0.61,
)
FOUND = SearchResponse(
    question="Where does Ann live?",
    intent=QueryIntent(),
    hits=[],
    profiles=[],
    events=[],
    timings_ms={},
    pending=[TURN],
    pending_cut=7,
)


@pytest.mark.parametrize("command", ["search", "ask"])
def test_json_keeps_the_pending_turns(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    args = build_parser().parse_args([command, "--space", "s", "--json", "Where does Ann live?"])
    if command == "search":
        show_search(args, FOUND)
    else:
        answered = AskResponse(
            **FOUND.model_dump(), answer="Oslo", answer_fact_ids=["pending:s9:s9:2"]
        )
        show_answer(args, answered)
    printed = json.loads(capsys.readouterr().out)
    assert printed["hits"] == [] and printed["profiles"] == [] and printed["pending_cut"] == 7
    assert "question" not in printed  # the text shows what was found, not what was asked
    assert [(p["session_id"], p["turn_id"], p["text"]) for p in printed["pending"]] == [
        ("s9", "s9:2", "I moved to Oslo.")
    ]
    if command == "ask":
        assert printed["answer"] == "Oslo"
        assert printed["answer_fact_ids"] == ["pending:s9:s9:2"]
