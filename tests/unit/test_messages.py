"""Plain chat messages cut into sessions: speakers, left-out roles, the time gap, stable ids."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from common.errors import all_errors
from common.models.messages import ChatMessage, MessagesBody, Received, messages_body

RECEIVED = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
GAP = timedelta(minutes=30)


def cut(body: Mapping[str, object], received: datetime = RECEIVED) -> list[Received]:
    return MessagesBody.model_validate(body).sessions(received, GAP)


def test_roles_map_to_the_named_people_and_system_messages_are_left_out() -> None:
    (session,) = cut(
        {
            "user": "Priya",
            "messages": [
                {"role": "system", "content": "You are a helpful assistant."},
                {"role": "user", "content": "I moved to Denver."},
                {"role": "assistant", "content": "How is it?", "name": "Ada"},
                {"role": "tool", "content": '{"weather": "sunny"}'},
                {"role": "assistant", "content": "Anything else?"},
            ],
        }
    )
    body = session.body
    assert body.participants == ["Priya", "Ada", "Assistant"]
    assert [(t.speaker, t.text) for t in body.turns] == [
        ("Priya", "I moved to Denver."),
        ("Ada", "How is it?"),
        ("Assistant", "Anything else?"),
    ]
    assert body.started_at == RECEIVED and session.timeless


def test_a_pause_longer_than_the_gap_starts_a_new_session() -> None:
    sessions = cut(
        {
            "messages": [
                {"role": "user", "content": "a", "created_at": "2024-06-02T10:00:00Z"},
                {"role": "assistant", "content": "b"},  # the time of the message before
                {"role": "user", "content": "c", "created_at": "2024-06-02T10:29:00Z"},
                {"role": "user", "content": "d", "created_at": "2024-06-02T11:00:00Z"},
            ]
        }
    )
    texts = [[t.text for t in s.body.turns] for s in sessions]
    assert texts == [["a", "b", "c"], ["d"]]
    starts = [s.body.started_at for s in sessions]
    assert starts == [datetime(2024, 6, 2, 10, tzinfo=UTC), datetime(2024, 6, 2, 11, tzinfo=UTC)]
    assert not any(s.timeless for s in sessions)


def test_leading_messages_without_a_time_take_the_first_given_one() -> None:
    (session,) = cut(
        {
            "messages": [
                {"role": "user", "content": "a"},
                {"role": "user", "content": "b", "created_at": "2024-06-02T10:00:00+02:00"},
            ]
        }
    )
    assert session.body.started_at == datetime(2024, 6, 2, 8, tzinfo=UTC)


def test_the_same_messages_are_the_same_session_whenever_they_arrive() -> None:
    chat = {"conversation_id": "c1", "messages": [{"role": "user", "content": "hi there"}]}
    first = cut(chat)[0].body
    later = cut(chat, RECEIVED + timedelta(days=1))[0].body
    assert first.session_id == later.session_id and first.session_id.startswith("c1-")
    other = cut({**chat, "conversation_id": "c2"})[0].body
    said_else = cut({**chat, "messages": [{"role": "user", "content": "hi"}]})[0].body
    named = cut({**chat, "user": "Priya"})[0].body
    assert len({first.session_id, other.session_id, said_else.session_id, named.session_id}) == 4


def test_every_error_of_a_body_is_named_at_once() -> None:
    with pytest.raises(ValidationError) as caught:
        MessagesBody.model_validate(
            {"messages": [{"rol": "user", "content": "x"}, {"role": "bot", "content": "y"}], "x": 1}
        )
    words = all_errors(caught.value.errors())
    for part in ("messages.0.role: Field required", "messages.0.rol: Extra inputs",
                 "messages.1.role: Input should be", "x: Extra inputs"):  # fmt: skip
        assert part in words


@pytest.mark.parametrize(
    ("messages", "why"),
    [
        ([{"role": "system", "content": "rules"}], "no user or assistant message has content"),
        ([{"role": "user", "content": "  "}], "no user or assistant message has content"),
        ([{"role": "user", "content": "x", "created_at": "1700000000"}], "ISO 8601"),
        ([{"role": "user", "content": "x", "created_at": "0001-01-01T00:00:00Z"}], "1900-01-01"),
    ],
)
def test_bodies_that_make_no_session_are_refused(messages: list[object], why: str) -> None:
    with pytest.raises(ValidationError, match=why):
        MessagesBody.model_validate({"messages": messages})


def test_a_blank_name_is_refused_wherever_a_name_goes() -> None:
    for body in ({"assistant": "\u001d"}, {"user": " "}):  # \u001d: blank to Python and JSON
        with pytest.raises(ValidationError, match="a name must not be blank"):
            MessagesBody.model_validate({**body, "messages": [{"role": "user", "content": "x"}]})


def test_conversation_ids_are_url_segments() -> None:
    with pytest.raises(ValidationError, match="URL path segment"):
        MessagesBody.model_validate(
            {"conversation_id": "a/b", "messages": [{"role": "user", "content": "x"}]}
        )


def test_the_sdk_body_leaves_unset_arguments_out() -> None:
    typed = ChatMessage(role="user", content="hi", name="Priya")
    assert messages_body([typed, {"role": "assistant", "content": "yo"}], user="P") == {
        "messages": [
            {"role": "user", "content": "hi", "name": "Priya"},
            {"role": "assistant", "content": "yo"},
        ],
        "user": "P",
    }
