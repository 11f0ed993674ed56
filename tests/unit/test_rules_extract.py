"""The `rules` extractor's facts from chat turns: each names its speaker, an opening pronoun is
resolved or said by the speaker, chit-chat is dropped, relative times are anchored against the
session day."""

from __future__ import annotations

from datetime import UTC, datetime

from common.llm.contracts import ExtractionWindow
from common.llm.rules_extract import extract_window, strip_address, third_person
from common.models.session import Turn
from common.settings import RulesSettings

PEOPLE = ["Tom", "Priya"]
MONDAY = datetime(2024, 3, 4, 19, 10, tzinfo=UTC)


def facts(*turns: tuple[str, str], caption: str | None = None) -> list[str]:
    """The facts of the last turn, the turns before it as its context."""
    built = [Turn(id=f"D1:{i}", speaker=s, text=t) for i, (s, t) in enumerate(turns, 1)]
    if caption is not None:
        built[-1] = built[-1].model_copy(update={"image_caption": caption})
    window = ExtractionWindow(
        session_id="s1",
        started_at=MONDAY,
        participants=PEOPLE,
        context=built[:-1],
        turns=built[-1:],
    )
    return [f.text for f in extract_window(window, RulesSettings())]


def test_first_and_second_person_become_names() -> None:
    assert third_person("I adopted a dog and my cat hates it.", "Tom", "Priya") == (
        "Tom adopted a dog and Tom's cat hates it."
    )
    assert third_person("You're a great cook.", "Tom", "Priya") == "Priya is a great cook."


def test_every_fact_names_a_participant() -> None:
    out = facts(("Tom", "The colors really blend nicely in that old mural downtown."))
    assert out == ["Tom says the colors really blend nicely in that old mural downtown."]


def test_a_sentence_about_the_listener_is_the_speakers_view() -> None:
    assert facts(("Tom", "You'd be a great nurse with that patience.")) == [
        "Tom says Priya would be a great nurse with that patience."
    ]


def test_subjectless_sentence_gets_its_speaker() -> None:
    assert facts(("Priya", "Gonna start my pottery class next week!")) == [
        "Priya is going to start Priya's pottery class in the week of 11 March 2024."
    ]


def test_opening_she_resolved_from_the_previous_turn() -> None:
    out = facts(
        ("Priya", "My sister just moved to Lisbon for work."),
        ("Tom", "She must love the street food and the trams there."),
    )
    assert out == ["Tom says Priya's sister must love the street food and the trams there."]


def test_opening_it_is_said_by_the_speaker() -> None:
    out = facts(("Tom", "I painted a lake sunrise last year. It hangs in my kitchen now."))
    assert out == ["Tom painted a lake sunrise in 2023.", "Tom says it hangs in Tom's kitchen now."]


def test_unresolved_opening_pronoun_is_said_by_the_speaker() -> None:
    out = facts(("Tom", "Thanks! It was a long drive through the mountains."))
    assert out == ["Tom says it was a long drive through the mountains."]


def test_chit_chat_and_questions_are_dropped() -> None:
    assert facts(("Tom", "Hey Priya! Thanks so much, that's awesome! How was your weekend?")) == []
    assert facts(("Tom", "Wow, great job! Talk to you soon!")) == []


def test_interjections_and_address_are_stripped() -> None:
    assert strip_address("Wow, Pri! I love hiking.", PEOPLE) == "I love hiking."
    assert strip_address("Yeah, I ran a race, Priya!", PEOPLE) == "I ran a race!"


def test_relative_time_anchored_and_vague_time_dated() -> None:
    assert facts(("Tom", "I ran a charity race yesterday.")) == [
        "Tom ran a charity race on 3 March 2024."
    ]
    assert facts(("Tom", "I've been baking sourdough bread lately.")) == [
        "Tom has been baking sourdough bread lately, as of 4 March 2024."
    ]


def test_image_caption_becomes_a_shared_photo() -> None:
    out = facts(("Priya", "Look at this!"), caption="a photo of a golden retriever on a beach")
    assert out == ["Priya shared a photo of a golden retriever on a beach."]
