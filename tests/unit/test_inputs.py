import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from common.errors import InvalidInput
from common.inputs.formats import read_sessions


def write(tmp_path: Path, doc: Any, name: str = "input.json") -> Path:
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc), encoding="utf-8")
    return path


def session(**over: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "session_id": "s1",
        "started_at": "2024-03-04T19:10:00",
        "participants": ["Priya", "Tom"],
        "turns": [
            {"id": "s1:1", "speaker": "Tom", "text": "Hi Priya!"},
            {"id": "s1:2", "speaker": "Priya", "text": "I started a pottery class."},
        ],
    }
    doc.update(over)
    return doc


def error(tmp_path: Path, doc: Any, fmt: str = "auto") -> str:
    with pytest.raises(InvalidInput) as info:
        read_sessions(write(tmp_path, doc), fmt)  # type: ignore[arg-type]
    return str(info.value)


def locomo(**conv_over: Any) -> dict[str, Any]:
    conv: dict[str, Any] = {
        "speaker_a": "Caroline",
        "speaker_b": "Melanie",
        "session_2_date_time": "10:04 am on 20 May, 2023",
        "session_2": [
            {"speaker": "Melanie", "dia_id": "D2:3", "text": "I painted a lake."},
            {"speaker": "Caroline", "dia_id": "D2:4", "text": "Lovely!"},
        ],
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Caroline", "dia_id": "D1:1", "text": "Hey Mel!"},
            {"speaker": "Melanie", "dia_id": "D1:2", "text": "Look", "blip_caption": "a dog"},
        ],
        "session_3_date_time": "9:00 am on 1 June, 2023",
        "session_3": [],
    }
    conv.update(conv_over)
    return {"sample_id": "conv-26", "conversation": conv}


def fact_entry(n: int, dia: str, speaker: str, facts: Any, **over: Any) -> dict[str, Any]:
    entry = {
        "session_number": n,
        "session_time": f"1:00 pm on {n} May, 2023",
        "dia_id": dia,
        "speaker": speaker,
        "text": f"text {dia}",
        "facts": facts,
    }
    entry.update(over)
    return entry


def test_single_session(tmp_path: Path) -> None:
    out = read_sessions(write(tmp_path, session(space="demo")))
    assert out.space == "demo"
    [s] = out.sessions
    assert (s.session_id, s.started_at, s.participants) == (
        "s1",
        datetime(2024, 3, 4, 19, 10),
        ["Priya", "Tom"],
    )
    assert [(t.id, t.position) for t in s.turns] == [("s1:1", 0), ("s1:2", 1)]
    assert s.seq is None
    assert not s.pre_extracted


def test_turn_ids_default_from_position(tmp_path: Path) -> None:
    turns = [{"speaker": "Tom", "text": "a"}, {"speaker": "Priya", "text": "b", "position": 5}]
    [s] = read_sessions(write(tmp_path, session(turns=turns))).sessions
    assert [(t.id, t.position) for t in s.turns] == [("s1:0", 0), ("s1:5", 5)]


def test_multi_session_inherits_participants(tmp_path: Path) -> None:
    first = session()
    del first["participants"]
    second = session(session_id="s2", participants=["Tom", "Anika"], seq=7, started_at="2024-04-15")
    second["turns"] = [{"speaker": "Anika", "text": "Hello"}]
    doc = {"space": "demo", "participants": ["Priya", "Tom"], "sessions": [first, second]}
    out = read_sessions(write(tmp_path, doc), "session")
    assert out.space == "demo"
    assert [(s.session_id, s.participants, s.seq) for s in out.sessions] == [
        ("s1", ["Priya", "Tom"], 0),
        ("s2", ["Tom", "Anika"], 7),
    ]
    assert out.sessions[1].started_at == datetime(2024, 4, 15)


def test_sample_conversation_reads() -> None:
    out = read_sessions(Path(__file__).parents[2] / "cli/samples/sample_conversation.json")
    assert out.space == "demo"
    assert [s.session_id for s in out.sessions] == ["s1", "s2", "s3", "s4"]
    assert [len(s.turns) for s in out.sessions] == [6, 5, 5, 4]


def test_malformed_json(tmp_path: Path) -> None:
    message = error(tmp_path, '{"session_id": "s1",\n  "turns": [}')
    assert "malformed JSON" in message
    assert "line 2" in message


def test_missing_file_and_non_object(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="no such file"):
        read_sessions(tmp_path / "absent.json")
    assert "expected a JSON object, got list" in error(tmp_path, [session()])


def test_missing_or_bad_started_at(tmp_path: Path) -> None:
    doc = session()
    del doc["started_at"]
    assert "started_at: Field required" in error(tmp_path, doc)
    assert "started_at: Input should be a valid datetime" in error(
        tmp_path, session(started_at="not a date")
    )


@pytest.mark.parametrize(
    ("over", "field"),
    [
        ({"session_id": ".."}, "session_id"),
        ({"session_id": "a/b"}, "session_id"),
        ({"started_at": "1899-12-31T23:59:59Z"}, "started_at"),
        ({"started_at": "3000-01-01T00:00:00"}, "started_at"),
    ],
)
def test_files_held_to_the_api_id_and_time_rules(
    tmp_path: Path, over: dict[str, Any], field: str
) -> None:
    """A space built from files must serve every session through the API alike."""
    assert f"{field}: " in error(tmp_path, session(**over))


def test_empty_turns(tmp_path: Path) -> None:
    assert "turns: List should have at least 1 item" in error(tmp_path, session(turns=[]))


def test_empty_sessions(tmp_path: Path) -> None:
    assert "'sessions' is empty" in error(tmp_path, {"participants": ["Tom"], "sessions": []})


def test_error_in_second_session_names_it(tmp_path: Path) -> None:
    bad = session(session_id="s2")
    del bad["started_at"]
    message = error(tmp_path, {"sessions": [session(), bad]})
    assert "sessions.1" in message and "started_at" in message


def test_unknown_speaker(tmp_path: Path) -> None:
    turns = [{"id": "s1:1", "speaker": "Bob", "text": "Hi"}]
    message = error(tmp_path, session(turns=turns))
    assert "unknown speaker" in message
    assert "Bob" in message


def test_blank_participant(tmp_path: Path) -> None:
    assert "participant name is blank" in error(tmp_path, session(participants=["Priya", "  "]))


def test_duplicate_turn_ids(tmp_path: Path) -> None:
    turns = [{"id": "x", "speaker": "Tom", "text": "a"}, {"id": "x", "speaker": "Tom", "text": "b"}]
    assert "'x' appears twice" in error(tmp_path, session(turns=turns))


def test_locomo(tmp_path: Path) -> None:
    out = read_sessions(write(tmp_path, locomo()))
    assert out.space == "conv-26"
    assert [(s.session_id, s.seq, s.started_at) for s in out.sessions] == [
        ("session_1", 1, datetime(2023, 5, 8, 13, 56)),
        ("session_2", 2, datetime(2023, 5, 20, 10, 4)),
    ]
    first, second = out.sessions
    assert first.participants == ["Caroline", "Melanie"]
    assert [(t.id, t.speaker, t.position) for t in first.turns] == [
        ("D1:1", "Caroline", 1),
        ("D1:2", "Melanie", 2),
    ]
    assert first.turns[1].image_caption == "a dog"
    assert [(t.id, t.position) for t in second.turns] == [("D2:3", 3), ("D2:4", 4)]
    assert not first.pre_extracted


def test_locomo_missing_dia_id_falls_back(tmp_path: Path) -> None:
    turns = [{"speaker": "Caroline", "text": "a"}, {"speaker": "Melanie", "text": "b"}]
    out = read_sessions(write(tmp_path, locomo(session_1=turns)), "locomo")
    assert [(t.id, t.position) for t in out.sessions[0].turns] == [("D1:1", 1), ("D1:2", 2)]


def test_locomo_lacking_speaker_a(tmp_path: Path) -> None:
    doc = locomo()
    del doc["conversation"]["speaker_a"]
    assert "lacks speaker_a/speaker_b" in error(tmp_path, doc)


def test_locomo_bad_session_time(tmp_path: Path) -> None:
    message = error(tmp_path, locomo(session_2_date_time="not a date"))
    assert "session_2" in message and "not a date" in message


def test_locomo_without_conversation(tmp_path: Path) -> None:
    assert "no 'conversation' object" in error(tmp_path, session(), "locomo")


def test_locomo_turn_without_text(tmp_path: Path) -> None:
    message = error(tmp_path, locomo(session_1=[{"speaker": "Caroline"}]))
    assert "session_1[0] lacks speaker or text" in message


def test_pre_extracted_facts(tmp_path: Path) -> None:
    results = [
        fact_entry(2, "D2:1", "Melanie", ["Melanie painted a lake."]),
        fact_entry(1, "D1:1", "Caroline", ["Caroline went to a support group."]),
        fact_entry(1, "D1:2", "Melanie", []),
        fact_entry(2, "D2:2", "Caroline", ["Caroline likes the lake painting."]),
    ]
    out = read_sessions(write(tmp_path, {"results": results}, "conv-30.json"))
    assert out.space == "conv-30"
    assert [(s.session_id, s.seq, s.started_at) for s in out.sessions] == [
        ("session_1", 1, datetime(2023, 5, 1, 13, 0)),
        ("session_2", 2, datetime(2023, 5, 2, 13, 0)),
    ]
    assert all(s.pre_extracted for s in out.sessions)
    assert out.sessions[0].participants == ["Melanie", "Caroline"]
    assert [(t.id, t.position, t.facts) for t in out.sessions[0].turns] == [
        ("D1:1", 1, ["Caroline went to a support group."]),
        ("D1:2", 2, []),
    ]
    assert [t.id for t in out.sessions[1].turns] == ["D2:1", "D2:2"]


def test_pre_extracted_session_name_and_metadata(tmp_path: Path) -> None:
    doc = {
        "metadata": {"source_file": "conv-41.json"},
        "results": [fact_entry(1, "D1:1", "Caroline", ["x"], session="first")],
    }
    out = read_sessions(write(tmp_path, doc))
    assert out.space == "conv-41"
    assert out.sessions[0].session_id == "first"


def test_pre_extracted_missing_key(tmp_path: Path) -> None:
    entry = fact_entry(1, "D1:1", "Caroline", ["x"])
    del entry["dia_id"]
    del entry["facts"]
    message = error(tmp_path, {"results": [fact_entry(1, "D1:0", "Caroline", []), entry]})
    assert "results[1] lacks dia_id, facts" in message


@pytest.mark.parametrize("facts", ["one fact", [1, 2], ["ok", None]])
def test_pre_extracted_facts_not_strings(tmp_path: Path, facts: Any) -> None:
    message = error(tmp_path, {"results": [fact_entry(1, "D1:1", "Caroline", facts)]})
    assert "results[0].facts must be a list of strings" in message


def test_pre_extracted_empty_and_bad_time(tmp_path: Path) -> None:
    assert "'results' is empty" in error(tmp_path, {"results": []})
    bad = fact_entry(3, "D3:1", "Caroline", [], session_time="garbage")
    message = error(tmp_path, {"results": [bad]})
    assert "session 3" in message and "cannot read session time 'garbage'" in message
