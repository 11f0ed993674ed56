"""Relative dates are anchored in the session's own local time, whatever its UTC offset."""

from datetime import date, datetime
from typing import Any

import pytest

from common.llm.contracts import MetadataGroup
from common.llm.rules import RulesBackend
from common.memory.extract import windows
from common.models.api import SessionBody
from common.models.session import SessionInput
from common.settings import MemorySettings, RulesSettings

RULES = RulesBackend(RulesSettings(), MemorySettings())
# every whole-hour offset from -12:00 to +14:00, and the half and quarter hours in use
OFFSETS = [f"{'-' if h < 0 else '+'}{abs(h):02d}:00" for h in range(-12, 15)]
OFFSETS += ["+05:30", "+05:45", "-09:30", "+12:45"]


def body(started_at: str, text: str, session_id: str = "s1") -> SessionBody:
    return SessionBody.model_validate(
        {
            "session_id": session_id,
            "started_at": started_at,
            "participants": ["Ann", "Bo"],
            "turns": [{"speaker": "Ann", "text": text}],
        }
    )


def anchored(session: SessionInput) -> tuple[str, Any]:
    """The rules extractor's fact and the metadata's event time, as ingest computes them."""
    (window,) = windows(session, context_k=0)
    (fact,) = RULES.extract_facts(window)
    group = MetadataGroup(
        texts=[fact.text], speaker="Ann", participants=["Ann", "Bo"], said_at=window.started_at
    )
    (meta,) = RULES.fact_metadata_batch([group])[0]
    return fact.text, meta.event_time


@pytest.mark.parametrize("offset", OFFSETS)
def test_yesterday_late_in_the_evening_is_the_local_day_before(offset: str) -> None:
    session = body(f"2024-03-10T23:30:00{offset}", "Yesterday I hiked up the mountain trail.")
    text, span = anchored(session.to_session())
    assert "9 March 2024" in text
    assert span is not None and span.start == span.end == date(2024, 3, 9)


@pytest.mark.parametrize("offset", OFFSETS)
def test_today_just_after_midnight_is_the_local_day(offset: str) -> None:
    session = body(f"2024-03-10T00:30:00{offset}", "Today I baked a lemon cake for the party.")
    text, span = anchored(session.to_session())
    assert "10 March 2024" in text
    assert span is not None and span.start == date(2024, 3, 10)


def test_the_stored_session_keeps_utc_and_the_offset_apart() -> None:
    session = body("2024-03-10T23:30:00-05:00", "Yesterday I hiked.").to_session()
    assert session.started_at == datetime(2024, 3, 11, 4, 30)  # naive UTC, as memory keeps
    assert session.utc_offset == -300
    assert session.local_time == datetime(2024, 3, 10, 23, 30)
    again = SessionInput.model_validate_json(session.model_dump_json())  # a task's payload
    assert again.utc_offset == -300 and again.local_time == session.local_time


def test_utc_and_naive_times_keep_no_offset_and_their_hash() -> None:
    naive = body("2024-03-11T04:30:00", "Yesterday I hiked.").to_session()
    for written in ("2024-03-11T04:30:00Z", "2024-03-11T04:30:00+00:00"):
        utc = body(written, "Yesterday I hiked.").to_session()
        assert utc.utc_offset is None and utc == naive
    # the same instant written in another offset is the same content (as before offsets
    # were kept): submitting it again is no conflict
    local = body("2024-03-10T23:30:00-05:00", "Yesterday I hiked.").to_session()
    assert local.content_hash() == naive.content_hash()


def test_a_dst_change_between_two_sessions() -> None:
    """New York moved from -05:00 to -04:00 at 2024-03-10 02:00 local: the evening before and
    the evening after are each anchored in their own offset."""
    before = body("2024-03-09T23:30:00-05:00", "Today I hiked up the mountain trail.", "a")
    after = body("2024-03-10T23:30:00-04:00", "Yesterday I hiked up the mountain trail.", "b")
    first, second = before.to_session(), after.to_session()
    assert (first.utc_offset, second.utc_offset) == (-300, -240)
    assert anchored(first)[1] == anchored(second)[1]
    assert anchored(first)[1].start == date(2024, 3, 9)
    # in UTC they fall on 10 and 11 March: read there, "today" and "yesterday" would differ
    assert (first.started_at.date(), second.started_at.date()) == (
        date(2024, 3, 10),
        date(2024, 3, 11),
    )


def test_a_time_with_an_offset_from_a_file_anchors_in_it() -> None:
    session = SessionInput.model_validate(
        {
            "session_id": "f1",
            "started_at": "2024-03-10T23:30:00+14:00",
            "participants": ["Ann", "Bo"],
            "turns": [{"speaker": "Ann", "text": "Yesterday I hiked up the mountain trail."}],
        }
    )
    assert session.local_time == datetime(2024, 3, 10, 23, 30)
    assert anchored(session)[1].start == date(2024, 3, 9)


def test_an_offset_beside_an_aware_time_is_refused() -> None:
    with pytest.raises(ValueError, match="utc_offset goes with a naive started_at"):
        SessionInput.model_validate(
            {
                "session_id": "f1",
                "started_at": "2024-03-10T23:30:00+01:00",
                "utc_offset": 60,
                "participants": ["Ann"],
                "turns": [{"speaker": "Ann", "text": "hi there friend"}],
            }
        )
