"""A search held to a relevance floor and to the caller's filters: each hit's relevance is
S_h(F,Q) on hand-computed vectors, `min_score` (or `retrieval.min_relevance`) drops the hits
below it, and filters by time, session and participant hold in every recall mode, for the
facts and for the pending turns alike."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from common.context import MemoryContext
from common.models.api import QueryBody, SearchFilters
from common.models.memory import Fact, FactSource, FactTime
from common.models.session import SessionInput, Turn
from common.retrieval.search import search, search_response
from tests.helpers.contexts import make_ctx
from tests.helpers.doubles import TableEncoder, unit
from tests.helpers.records import stored_fact

Q = unit(1, 0, 0, 0)
QUESTION = "Where has Priya travelled?"
MODES = ["full", "no-graph", "flat"]


def _fact(fid: str, text: str, session: str, day: int, people: tuple[str, ...]) -> Fact:
    fact = stored_fact(fid, text, participants=people, turn=f"{session}:0")
    return fact.model_copy(
        update={
            "time": FactTime(session=datetime(2023, 5, day, 12, 0)),
            "source": FactSource(
                session_id=session, session_seq=day, turn_ids=[f"{session}:0"], positions=[0]
            ),
        }
    )


# No fact shares a word with the question, so L = 0 and S_h = 0.7·cos: 0.7, 0.495, 0.35, 0
FACTS = [
    (_fact("f1", "Lisbon in spring.", "s1", 1, ("Priya",)), unit(1, 0, 0, 0)),
    (_fact("f2", "Oslo with Dev.", "s2", 10, ("Priya", "Dev")), unit(1, 1, 0, 0)),
    (_fact("f3", "Kyoto alone.", "s3", 20, ("Dev",)), unit(1, 0, 1.7320508, 0)),
    (_fact("f4", "Cairo later.", "s4", 28, ("Priya",)), unit(0, 1, 0, 0)),
]


@pytest.fixture
def ctx(tmp_path: Path) -> MemoryContext:
    ctx = make_ctx(tmp_path, TableEncoder({QUESTION: Q}))
    index = ctx.index("t", "s")
    for fact, vector in FACTS:
        index.put_fact(fact, vector)
    return ctx


def _found(ctx: MemoryContext, mode: str = "full", **kwargs: Any) -> dict[str, float]:
    result = search(ctx, "t", "s", QUESTION, k=10, mode=mode, **kwargs)  # type: ignore[arg-type]
    return {h.fact.id: round(h.relevance, 3) for h in result.hits}


@pytest.mark.parametrize("mode", MODES)
def test_each_hit_carries_its_relevance_and_the_floor_drops_those_below(
    ctx: MemoryContext, mode: str
) -> None:
    assert _found(ctx, mode, min_score=0.0) == {"f1": 0.7, "f2": 0.495, "f3": 0.35, "f4": 0.0}
    assert _found(ctx, mode) == {"f1": 0.7, "f2": 0.495, "f3": 0.35}  # the default, 0.28
    assert _found(ctx, mode, min_score=0.4) == {"f1": 0.7, "f2": 0.495}
    assert _found(ctx, mode, min_score=0.71) == {}  # nothing relevant: no hits, not the nearest


def test_the_configured_floor_applies_unless_the_query_sets_its_own(ctx: MemoryContext) -> None:
    ctx.settings.retrieval.min_relevance = 0.4
    assert set(_found(ctx)) == {"f1", "f2"}
    assert set(_found(ctx, min_score=0.0)) == {"f1", "f2", "f3", "f4"}
    wire = search_response(search(ctx, "t", "s", QUESTION, k=10, min_score=0.6))
    assert [(h.fact_id, round(h.relevance, 3)) for h in wire.hits] == [("f1", 0.7)]


@pytest.mark.parametrize("mode", MODES)
def test_filters_keep_only_the_facts_they_name(ctx: MemoryContext, mode: str) -> None:
    def ids(**filters: object) -> set[str]:
        return set(_found(ctx, mode, min_score=0.0, filters=SearchFilters(**filters)))  # type: ignore[arg-type]

    assert ids(after="2023-05-10T00:00:00") == {"f2", "f3", "f4"}
    assert ids(before="2023-05-10T12:00:00") == {"f1", "f2"}  # the bound itself is inside
    assert ids(after="2023-05-05T00:00:00Z", before="2023-05-25T00:00:00Z") == {"f2", "f3"}
    # wall-clock time, as sessions are kept: 12:00+02:00 is f2's 12:00
    assert ids(after="2023-05-10T12:00:00+02:00", before="2023-05-10T12:00:00+02:00") == {"f2"}
    assert ids(session_ids=["s3", "s4", "nope"]) == {"f3", "f4"}
    assert ids(participants=["Dev"]) == {"f2", "f3"}
    assert ids(participants=["Dev"], session_ids=["s2", "s4"]) == {"f2"}
    assert ids(participants=["Nobody"]) == set()
    assert ids() == {"f1", "f2", "f3", "f4"}


def test_a_fact_written_after_a_filtered_search_is_filtered_too(ctx: MemoryContext) -> None:
    late = SearchFilters(after="2023-05-29T00:00:00Z")  # type: ignore[arg-type]
    assert set(_found(ctx, min_score=0.0, filters=late)) == set()
    ctx.index("t", "s").put_fact(_fact("f5", "Rome at last.", "s5", 30, ("Priya",)), Q)
    assert set(_found(ctx, min_score=0.0, filters=late)) == {"f5"}


def test_pending_turns_are_filtered_by_their_session(ctx: MemoryContext) -> None:
    pending = [
        SessionInput(
            session_id=sid,
            started_at=datetime(2023, 6, day, 9, 0),
            participants=[person],
            turns=[Turn(speaker=person, text=text)],
        )
        for sid, day, person, text in [("p1", 1, "Priya", "Lima!"), ("p2", 9, "Dev", "Quito!")]
    ]
    ctx.embedder.table.update({"Priya: Lima!": Q, "Dev: Quito!": Q})  # type: ignore[attr-defined]

    def turns(**filters: object) -> list[str]:
        result = search(
            ctx,
            "t",
            "s",
            QUESTION,
            pending=pending,
            filters=SearchFilters(**filters),  # type: ignore[arg-type]
        )
        return [t.session.session_id for t in result.pending]

    assert sorted(turns()) == ["p1", "p2"]
    assert turns(participants=["Dev"]) == ["p2"]
    assert turns(before="2023-06-05T00:00:00Z") == ["p1"]
    assert turns(session_ids=["p2"]) == ["p2"]


@pytest.mark.parametrize(
    "body",
    [
        {"min_score": 1.5},
        {"min_score": -0.1},
        {"filters": {"after": "not a time"}},
        {"filters": {"session_ids": []}},
        {"filters": {"participants": [""]}},
        {"filters": {"participants": ["\u001d"]}},  # blank to Python and to the schema
        {"as_of": "yesterday"},
        {"filters": {"when": "today"}},
    ],
)
def test_bad_relevance_floors_and_filters_are_refused(body: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        QueryBody.model_validate({"question": QUESTION, **body})
