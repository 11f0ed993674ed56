"""One identity rule for names on every path: NFC, blanks collapsed, case kept."""

from __future__ import annotations

import unicodedata
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from common.llm.contracts import QueryIntent
from common.memory.ingest import note_participants
from common.models.api import SessionBody
from common.models.names import person_name
from common.models.session import SessionInput
from common.retrieval.search import search
from common.store import records
from tests.helpers.contexts import make_ctx

NFC = unicodedata.normalize("NFC", "José")
NFD = unicodedata.normalize("NFD", "José")


def session(participants: list[str], speakers: list[str]) -> dict[str, Any]:
    return {
        "session_id": "s1",
        "started_at": "2024-03-04T10:00:00Z",
        "participants": participants,
        "turns": [{"speaker": s, "text": "I moved to Lisbon last spring."} for s in speakers],
    }


def test_the_two_forms_differ_until_normalised() -> None:
    assert NFC != NFD and len(NFD) == len(NFC) + 1
    assert person_name(NFD) == person_name(NFC) == NFC
    assert person_name("  Ann \t\u00a0 Lee\ufeff ") == "Ann Lee"
    assert person_name("ann") != person_name("Ann")  # case counts


@pytest.mark.parametrize("make", [SessionInput.model_validate, SessionBody.model_validate])
def test_a_speaker_in_the_other_form_is_the_participant(make: Any) -> None:
    made = make(session([NFC], [NFD, NFC]))
    ingested = made if isinstance(made, SessionInput) else made.to_session()
    assert ingested.participants == [NFC]
    assert [t.speaker for t in ingested.turns] == [NFC, NFC]
    other = SessionBody.model_validate(session([NFD], [NFD])).to_session()
    same = SessionBody.model_validate(session([NFC], [NFC])).to_session()
    assert other.content_hash() == same.content_hash()  # sent again in the other form


def test_one_person_in_two_forms_is_a_repeated_participant() -> None:
    with pytest.raises(ValidationError, match="participants repeat a name"):
        SessionInput.model_validate(session([NFC, NFD], [NFC]))
    with pytest.raises(ValidationError, match="participants repeat a name"):
        SessionInput.model_validate(session(["Ann Lee", "Ann  Lee"], ["Ann Lee"]))


def test_the_refusal_names_the_speaker_as_the_participants_are_kept() -> None:
    with pytest.raises(ValidationError) as caught:
        SessionInput.model_validate(session([NFD, "Ann"], ["Bo"]))
    assert f"unknown speaker 'Bo' (participants: {NFC}, Ann)" in str(caught.value)


def test_case_tells_people_apart() -> None:
    made = SessionInput.model_validate(session(["Ann", "ann"], ["ann", "Ann"]))
    assert made.participants == ["Ann", "ann"]
    with pytest.raises(ValidationError, match="unknown speaker 'ANN'"):
        SessionInput.model_validate(session(["Ann", "ann"], ["ANN"]))


def test_a_question_in_the_other_form_filters_by_the_participant(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, scripted=False)
    note_participants(ctx, "t", "s", SessionInput.model_validate(session([NFD], [NFD])))
    assert records.require_space(ctx.store, "t", "s").participants == [NFC]
    intents: list[QueryIntent] = []
    asked = ctx.backend.query_intent

    def spy(question: str, participants: list[str], now: Any) -> QueryIntent:
        intents.append(asked(question, participants, now))
        return intents[-1]

    ctx.backend.query_intent = spy  # type: ignore[method-assign]
    search(ctx, "t", "s", f"Where did {NFD} move to?")
    assert intents[0].participants == [NFC]
