"""The `rules` extractor's facts from chat turns: each names its speaker, an opening pronoun is
resolved or said by the speaker, chit-chat is dropped, the question a turn answers stays with
its first fact, relative times are anchored against the session day."""

from __future__ import annotations

from datetime import UTC, datetime

from common.llm.contracts import ExtractionWindow, FactView
from common.llm.rules import RulesBackend
from common.llm.rules_extract import extract_window, statement, strip_address, third_person
from common.models.memory import FactTime
from common.models.session import Turn
from common.settings import MemorySettings, RulesSettings

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


def test_the_verb_after_a_rewritten_i_agrees_with_the_name() -> None:
    said = "Since the accident, I've thought about how much I need them, and I haven't slept."
    assert third_person(said, "Tom", "Priya") == (
        "Since the accident, Tom has thought about how much Tom needs them, and Tom hasn't slept."
    )
    assert third_person("the shelter I volunteer at", "Tom", "Priya") == (
        "the shelter Tom volunteers at"
    )
    assert third_person("I totally understand.", "Tom", "Priya") == "Tom totally understands."
    assert third_person("That's how I feel.", "Tom", "Priya") == "That's how Tom feels."
    # a question or a bare verb after a word that asks for it keeps the verb as it is
    assert third_person("Can I bring my dog?", "Tom", "Priya") == "Can Tom bring Tom's dog?"
    assert third_person("Let me know if I can help.", "Tom", "Priya") == (
        "Let Tom know if Tom can help."
    )
    assert third_person("What do I give him?", "Tom", "Priya") == "What does Tom give him?"
    assert third_person("Do you have a picture?", "Tom", "Priya") == "Does Priya have a picture?"
    assert third_person("Have you been there?", "Tom", "Priya") == "Has Priya been there?"


def test_a_contraction_after_says_is_lowered() -> None:
    out = facts(("Tom", "They'll help with the paperwork and the long wait."))
    assert out == ["Tom says they'll help with the paperwork and the long wait."]


def test_every_fact_names_a_participant() -> None:
    out = facts(("Tom", "The colors really blend nicely in that old mural downtown."))
    assert out == ["Tom says the colors really blend nicely in that old mural downtown."]


def test_a_sentence_only_about_the_listener_is_a_reaction_and_dropped() -> None:
    assert facts(("Tom", "You'd be a great nurse with that patience.")) == []
    out = facts(("Tom", "Your garden looks amazing this spring. I planted tomatoes in May."))
    assert out == ["Tom planted tomatoes in May."]


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


def test_a_later_it_goes_on_with_the_sentence_before() -> None:
    """'It', 'this' or 'that' opening a later sentence of the turn joins the fact before it,
    even where the sentence alone would hold too little ('It's one of my favorites')."""
    out = facts(("Tom", "I painted a lake sunrise last year. It hangs in my kitchen now."))
    assert out == ["Tom painted a lake sunrise in 2023; it hangs in Tom's kitchen now."]
    out = facts(("Tom", "I make a honey garlic chicken a lot. It's one of my favorites."))
    assert out == ["Tom makes a honey garlic chicken a lot; it's one of Tom's favorites."]


def test_unresolved_opening_pronoun_is_said_by_the_speaker() -> None:
    out = facts(("Tom", "Thanks! It was a long drive through the mountains."))
    assert out == ["Tom says it was a long drive through the mountains."]


def test_chit_chat_and_questions_are_dropped() -> None:
    assert facts(("Tom", "Hey Priya! Thanks so much, that's awesome! How was your weekend?")) == []
    assert facts(("Tom", "Wow, great job! Talk to you soon!")) == []


def test_wishes_urgings_exclamations_and_guesses_are_dropped() -> None:
    said = "Take it easy and keep going! Let's stay in touch. Thanks for showing us your dogs!"
    assert facts(("Tom", said + " What a touching moment. Tell me more about it!")) == []
    guesses = "That must have been a scary drive. Those places must've been amazing."
    assert facts(("Tom", guesses + " Must feel great to finish it.")) == []


def test_an_answer_may_be_a_bare_phrase_beside_its_question() -> None:
    out = facts(("Priya", "What are your dogs called?"), ("Tom", "Max and Daisy."))
    assert out == ["Tom says Max and Daisy (Priya had asked: What are Tom's dogs called?)."]
    assert facts(("Tom", "Max and Daisy.")) == []  # nothing was asked: too little to hold


def test_what_the_speaker_did_needs_only_one_content_word() -> None:
    assert facts(("Tom", "Oh yeah, we went to the beach.")) == ["Tom and others went to the beach."]


def test_a_sentence_naming_a_place_or_title_needs_only_one_content_word() -> None:
    assert facts(("Tom", "I was in Chicago, it was awesome!")) == [
        "Tom was in Chicago, it was awesome."
    ]
    assert facts(("Tom", 'I just reread "Dune" for fun.')) == ['Tom just reread "Dune" for fun.']
    assert facts(("Tom", "It was so awesome, honestly!")) == []  # one common word: no fact


def test_we_and_our_of_the_two_who_talk_name_both() -> None:
    assert facts(("Tom", "Since we last talked, I adopted a parrot.")) == [
        "Since Tom and Priya last talked, Tom adopted a parrot."
    ]
    assert third_person("I loved our last chat.", "Tom", "Priya") == (
        "Tom loved Tom and Priya's last chat."
    )
    # "we" that may be anyone with the speaker stays the speaker and others
    assert third_person("We hiked, then we talked.", "Tom", "Priya") == (
        "Tom and others hiked, then Tom and others talked."
    )


def test_a_tagged_statement_is_a_statement_and_asks_nothing() -> None:
    tagged = ("Priya", "Sunflowers mean warmth and happiness, right?")
    assert facts(tagged) == ["Priya says Sunflowers mean warmth and happiness."]
    assert facts(tagged, ("Tom", "I have sunflowers in my backyard.")) == [
        "Tom has sunflowers in Tom's backyard."
    ]


def test_a_goodbye_that_sets_a_meeting_is_a_plan() -> None:
    assert facts(("Tom", "Great, then I agree! See you tomorrow at McGee's Pub!")) == [
        "Tom will see Priya on 5 March 2024 at McGee's Pub."
    ]


def test_curly_apostrophes_and_you_all() -> None:
    assert facts(("Tom", "I\u2019m leaving for Toronto the day after tomorrow.")) == [
        "Tom is leaving for Toronto on 6 March 2024."
    ]
    assert third_person("Do you all hike together?", "Tom", "Priya") == (
        "Do Priya and others hike together?"
    )


def test_interjections_and_address_are_stripped() -> None:
    assert strip_address("Wow, Pri! I love hiking.", PEOPLE) == "I love hiking."
    assert strip_address("Yeah, I ran a race, Priya!", PEOPLE) == "I ran a race!"
    # a name that opens a sentence as its subject is no form of address
    assert strip_address("Tom adopted a parrot.", PEOPLE) == "Tom adopted a parrot."
    assert strip_address("Thanks Priya - love the vase!", PEOPLE) == "Love the vase!"
    assert strip_address("Long time no chat - I adopted a pup.", PEOPLE) == "I adopted a pup."
    # "no worries" opens as a whole: its "no" alone would leave "Worries, I know ..."
    assert strip_address("No worries, I know work is busy.", PEOPLE) == "I know work is busy."
    assert strip_address("Mmm, that curry sounds delicious!", PEOPLE) == (
        "That curry sounds delicious!"
    )
    assert facts(("Priya", "Tom adopted a parrot called Kiwi.")) == [
        "Tom adopted a parrot called Kiwi."
    ]


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


def test_the_first_fact_keeps_the_question_it_answers() -> None:
    """The other person's last question, in the third person and anchored, follows the
    answer's first fact only; what the answer says is the fact without it."""
    out = facts(
        ("Priya", "Congrats on the deal! How did it feel to sign it last week?"),
        (
            "Tom",
            "Thanks! It felt like all those training hours paid off. "
            "I took my whole team out for dinner.",
        ),
    )
    assert out == [
        "Tom says it felt like all those training hours paid off (Priya had asked: How did it"
        " feel to sign it in the week of 26 February 2024?).",
        "Tom took Tom's whole team out for dinner.",
    ]
    assert statement(out[0]) == "Tom says it felt like all those training hours paid off."
    assert statement(out[1]) == out[1]


def test_no_question_kept_without_one_asked_by_the_other_person() -> None:
    answer = ("Tom", "I adopted a beagle puppy named Biscuit.")
    expected = ["Tom adopted a beagle puppy named Biscuit."]
    assert facts(("Priya", "I started a pottery class."), answer) == expected
    assert facts(("Tom", "Did I tell you my news?"), answer) == expected  # his own question
    assert facts(("Priya", "And you?"), answer) == expected  # too short to add anything


def test_a_profile_is_the_statement_without_the_question() -> None:
    """The question drawn out of the other person ("Where do you live now?") is no part of the
    trait, and neither is its asker a participant of the fact."""
    [text] = facts(("Tom", "Where do you live these days?"), ("Priya", "I live in Denver now."))
    assert text == "Priya lives in Denver now (Tom had asked: Where does Priya live these days?)."
    backend = RulesBackend(RulesSettings(), MemorySettings())
    [meta] = backend.fact_metadata([text], "Priya", PEOPLE, MONDAY)
    assert meta.participants == ["Priya"] and meta.profile_worthy
    view = FactView(
        id="f1", text=text, participants=["Priya"], keywords=meta.keywords,
        time=FactTime(session=MONDAY),
    )  # fmt: skip
    [candidate] = backend.profile_candidates([view])
    assert candidate.content == "Priya lives in Denver now."
    assert candidate.slot == "residence"
