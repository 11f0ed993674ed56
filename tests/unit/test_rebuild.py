"""Which target a rebuild accepts: an empty space, or one holding only this rebuild's sessions."""

from __future__ import annotations

from datetime import datetime

import pytest

from common.errors import Conflict, InvalidInput
from common.memory.rebuild import check_spaces, check_target
from common.models.session import SessionInput, Turn

EMPTY = {"sessions": 0, "facts": 0, "events": 0, "profiles": 0}


def _session(sid: str, text: str = "I adopted a cat.") -> SessionInput:
    return SessionInput(
        session_id=sid,
        started_at=datetime(2024, 3, 1, 18, 30),
        participants=["Ann"],
        turns=[Turn(speaker="Ann", text=text)],
    )


SOURCE = [_session("s1"), _session("s2")]


def test_an_empty_or_missing_target_is_accepted() -> None:
    check_target("a", "b", SOURCE, EMPTY, [])
    check_target("a", "b", SOURCE, {}, [])


def test_a_target_holding_part_of_the_same_rebuild_is_a_resume() -> None:
    check_target("a", "b", SOURCE, {**EMPTY, "sessions": 1, "facts": 3}, [_session("s1")])
    # the stored order (seq) is not content
    moved = _session("s2").model_copy(update={"seq": 7})
    check_target("a", "b", SOURCE, {**EMPTY, "sessions": 1}, [moved])


def test_a_target_with_other_memory_is_refused() -> None:
    with pytest.raises(Conflict, match="holds session 'x'"):
        check_target("a", "b", SOURCE, {**EMPTY, "sessions": 1}, [_session("x")])
    with pytest.raises(Conflict, match="not the same session"):
        check_target("a", "b", SOURCE, {**EMPTY, "sessions": 1}, [_session("s1", "Other.")])
    with pytest.raises(Conflict, match="not empty"):
        check_target("a", "b", SOURCE, {**EMPTY, "facts": 2}, [])
    with pytest.raises(InvalidInput):
        check_spaces("a", "a")
