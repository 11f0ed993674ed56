"""The context block: its sections in order (profiles in force, facts by rank, events, turns
not yet processed), each line labelled with what it cites, the budget in characters / 4
taken by rank with a line too long skipped, and a block that says when memory holds nothing."""

from __future__ import annotations

from datetime import date, datetime

from common.models.memory import FactTime, TimeRange
from common.models.query import (
    EventHit,
    PendingTurn,
    ProfileHit,
    QueryIntent,
    SearchHit,
    SearchResponse,
)
from common.retrieval.context import compose, tokens

AS_OF = datetime(2024, 7, 1, 9, 0)


def _hit(fid: str, text: str, said: datetime, event: TimeRange | None = None) -> SearchHit:
    return SearchHit(
        fact_id=fid, text=text, score=0.01, relevance=0.62, stages={}, turn_ids=[f"{fid}:t"],
        session_id=f"{fid}-session", time=FactTime(session=said, event=event),
    )  # fmt: skip


def _found(**parts: object) -> SearchResponse:
    base: dict[str, object] = dict(
        question="Where does Priya live?", intent=QueryIntent(), hits=[], profiles=[], events=[],
        timings_ms={},
    )  # fmt: skip
    return SearchResponse.model_validate(base | parts)


FOUND = _found(
    profiles=[ProfileHit(profile_id="p-1", person="Priya", content="Priya lives in Denver.",
                         valid_from=date(2024, 6, 2))],
    hits=[_hit("f-1", "Priya moved to Denver.", datetime(2024, 6, 2, 10, 0)),
          _hit("f-2", "Priya lived in Boston.", datetime(2024, 3, 4, 9, 0),
               TimeRange(start=date(2023, 1, 1), end=date(2024, 5, 31)))],
    events=[EventHit(event_id="e-1", summary="Priya's move from Boston to Denver.", score=0.5)],
    pending=[PendingTurn(session_id="s9", turn_id="s9:0", position=0, speaker="Priya",
                         text="We bought a house!", time=datetime(2024, 6, 30, 8, 0), score=0.4)],
)  # fmt: skip


def test_the_block_lists_each_section_in_order_with_labels_that_cite() -> None:
    block = compose(FOUND, AS_OF, 1000)
    assert block.text == (
        "Memory for: Where does Priya live?\nAs of 2024-07-01.\n\n"
        "Profiles in force then:\n[P1] Priya lives in Denver. (since 2024-06-02)\n\n"
        "Facts, most relevant first:\n"
        "[F1] 2024-06-02, session f-1-session: Priya moved to Denver.\n"
        "[F2] 2023-01-01 to 2024-05-31, session f-2-session: Priya lived in Boston.\n\n"
        "Events these facts belong to:\n[E1] Priya's move from Boston to Denver.\n\n"
        "Said recently, not yet processed:\n[T1] 2024-06-30, session s9: Priya: We bought a house!"
    )
    assert [(i.label, i.id) for i in block.items] == [
        ("P1", "p-1"), ("F1", "f-1"), ("F2", "f-2"), ("E1", "e-1"), ("T1", "pending:s9:s9:0"),
    ]  # fmt: skip
    assert block.items[1].turn_ids == ["f-1:t"] and block.items[1].relevance == 0.62
    assert block.tokens == tokens(block.text) and block.left_out == 0


def test_the_budget_keeps_the_best_ranked_lines_and_skips_one_too_long() -> None:
    long = _hit("f-3", "Priya " + "talked at length " * 40, datetime(2024, 6, 3, 9, 0))
    found = FOUND.model_copy(update={"hits": [FOUND.hits[0], long, FOUND.hits[1]]})
    budget = compose(FOUND, AS_OF, 10_000).tokens + 10  # the rest, and not the long line
    block = compose(found, AS_OF, budget)
    assert block.tokens <= budget and block.left_out == 1
    assert [i.id for i in block.items] == ["p-1", "f-1", "f-2", "e-1", "pending:s9:s9:0"]
    assert [i.label for i in block.items] == ["P1", "F1", "F2", "E1", "T1"]  # no gap
    tight = compose(found, AS_OF, 50)
    # the facts do not fit beside the profile; the short event summary still does
    assert tight.tokens <= 50 and [i.id for i in tight.items] == ["p-1", "e-1"]
    assert tight.left_out == 4


def test_a_block_with_nothing_relevant_says_so() -> None:
    block = compose(_found(), AS_OF, 1000)
    assert block.items == [] and block.text.endswith(
        "Memory holds nothing relevant to this question."
    )
