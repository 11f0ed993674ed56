"""Reads that see sessions still being ingested: the ranking rule of pending turns on
hand-computed cases, the bound on a backlog, the guard against counting a turn twice, the
per-process vector cache, and which sessions count as pending."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from common.models import ids
from common.models.jobs import AcceptPayload, Job
from common.models.query import PendingTurn, QueryIntent, SearchResponse
from common.models.session import SessionInput, SessionRecord, Turn
from common.retrieval.pending import TurnVectors, pending_sessions, rank, turn_text
from common.retrieval.search import ask, search, search_response
from common.settings import SimilaritySettings
from common.similarity import TextQuery
from common.store import records
from common.store.coordination.roles import Coordination
from tests.helpers.contexts import make_ctx
from tests.helpers.doubles import TableEncoder, unit
from tests.helpers.records import stored_fact

WEIGHTS = SimilaritySettings()  # alpha 0.7, beta 0.3, BM25 k1 1.2, b 0.75
Q = unit(1, 0, 0, 0)


def _session(session_id: str, day: int, lines: list[tuple[str, str]]) -> SessionInput:
    return SessionInput(
        session_id=session_id,
        started_at=datetime(2024, 5, day, 9, 0),
        participants=sorted({speaker for speaker, _ in lines}),
        turns=[Turn(speaker=s, text=t) for s, t in lines],
    )


# Every turn has three terms (speaker, two words), so each is of average length and BM25 of
# a query term a turn holds once is idf·(k1+1)/(1+k1) = idf: L = 1 for it, 0 for the others.
OLD = _session("s1", 1, [("Ann", "denver skiing")])
NEW = _session("s2", 2, [("Bob", "boston sailing"), ("Ann", "paris cooking")])
TABLE = {
    "Ann: denver skiing": unit(0, 1, 0, 0),  # cos 0
    "Bob: boston sailing": unit(1, 1, 0, 0),  # cos 1/sqrt(2)
    "Ann: paris cooking": unit(1, 0, 0, 0),  # cos 1
}


def _vectors(session: SessionInput, rows: Sequence[int]) -> np.ndarray:
    return np.stack([TABLE[turn_text(session.turns[i])] for i in rows])


def _rank(
    query: str = "denver",
    top_k: int = 5,
    min_score: float = 0.0,
    max_turns: int = 500,
    sources: frozenset[tuple[str, str]] = frozenset(),
) -> tuple[list[tuple[str, float]], int]:
    found = rank(
        [OLD, NEW], Q, TextQuery.of(query), _vectors, WEIGHTS, top_k, min_score, max_turns, sources
    )
    return [(h.turn.text, round(h.score, 4)) for h in found.hits], found.cut


def test_pending_turns_rank_by_the_facts_hybrid_score() -> None:
    # S_h = 0.7·cos + 0.3·L: paris 0.7·1 = 0.7; boston 0.7/sqrt(2) = 0.4950; denver 0.3·1
    hits, cut = _rank()
    assert hits == [("paris cooking", 0.7), ("boston sailing", 0.495), ("denver skiing", 0.3)]
    assert cut == 0
    assert round(0.7 / math.sqrt(2), 4) == 0.495
    # the floor and the top k
    assert _rank(min_score=0.35)[0] == [("paris cooking", 0.7), ("boston sailing", 0.495)]
    assert _rank(top_k=1)[0] == [("paris cooking", 0.7)]


def test_the_lexical_channel_is_bm25_over_the_pending_turns_themselves() -> None:
    # "boston" is in one turn of three: L = 1 there, and boston overtakes paris
    hits, _ = _rank("boston")
    assert hits[0] == ("boston sailing", round(0.7 / math.sqrt(2) + 0.3, 4))
    assert hits[1] == ("paris cooking", 0.7)
    # "ann" is in two turns of three: idf(ann) = ln(1 + 1.5/2.5) = 0.4700, idf(denver) =
    # ln(1 + 2.5/1.5) = 0.9808; paris holds ann only, L = 0.4700/1.4508 = 0.3240, S_h =
    # 0.7 + 0.3·0.3240 = 0.7972; denver holds both, L = 1, S_h = 0.3
    both, _ = _rank("ann denver")
    assert both == [("paris cooking", 0.7972), ("boston sailing", 0.495), ("denver skiing", 0.3)]


def test_a_long_backlog_is_searched_newest_session_first_and_says_what_it_cut() -> None:
    hits, cut = _rank(max_turns=2)  # the newer session's two turns; the older one's is cut
    assert [t for t, _ in hits] == ["paris cooking", "boston sailing"] and cut == 1
    hits, cut = _rank(max_turns=1)  # a session crossing the bound keeps its last turns
    assert [t for t, _ in hits] == ["paris cooking"] and cut == 2
    assert _rank(max_turns=0) == ([], 3)


def test_a_turn_that_is_already_the_source_of_a_returned_fact_is_left_out() -> None:
    paris = NEW.turns[1]
    hits, cut = _rank(sources=frozenset({("s2", str(paris.id))}))
    assert [t for t, _ in hits] == ["boston sailing", "denver skiing"] and cut == 0
    # the same turn id in another session is another turn
    hits, _ = _rank(sources=frozenset({("s1", str(paris.id))}))
    assert hits[0][0] == "paris cooking"


def test_blank_turns_are_not_searched() -> None:
    blank = SessionInput(
        session_id="s3",
        started_at=datetime(2024, 5, 3),
        participants=["Ann"],
        turns=[Turn(speaker="Ann", text="   ", facts=["Ann said nothing."]), *OLD.turns],
    )
    found = rank([blank], Q, TextQuery.of("denver"), _vectors, WEIGHTS, 5, 0.0, 500)
    assert [h.turn.text for h in found.hits] == ["denver skiing"] and found.searched == 1


def test_turn_vectors_are_cached_per_session_content_and_bounded() -> None:
    encoder = TableEncoder(TABLE)
    cache = TurnVectors(capacity=1)
    first = cache.get(NEW, [0, 1], encoder.encode)
    assert encoder.calls == 1
    assert np.array_equal(cache.get(NEW, [1, 0], encoder.encode), first[::-1])
    assert encoder.calls == 1
    cache.get(OLD, [0], encoder.encode)  # evicts NEW (capacity 1)
    cache.get(NEW, [1], encoder.encode)
    assert encoder.calls == 3


def test_pending_sessions_are_those_in_the_sequence_with_no_facts_yet(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    coord = Coordination.sqlite(tmp_path / "c.sqlite")
    now = time.time()
    sessions = {sid: _session(sid, day, [("Ann", f"turn of {sid}")]) for sid, day in
                [("queued", 1), ("accepted", 2), ("committed", 3), ("erased", 4),
                 ("half-erased", 5)]}  # fmt: skip
    for order, (sid, session) in enumerate(sessions.items()):
        coord.sequence.register("t", "s", sid, order)
        job = Job(
            job_id=ids.job_id("t", "s", sid), tenant="t", space="s", session_id=sid,
            created_at=now, updated_at=now,
        )  # fmt: skip
        body = AcceptPayload(
            enqueued_at=0, job_id=job.job_id, tenant="t", space="s", session=session
        )
        coord.jobs.put_job(job, body.model_dump_json())
    for sid in ("accepted", "committed", "half-erased"):
        records.put_session(
            ctx.store,
            SessionRecord(
                tenant="t", space="s", session=sessions[sid], seq=0, content_hash="h",
                status="committed" if sid == "committed" else "accepted",
                job_id=ids.job_id("t", "s", sid),
            ),
        )  # fmt: skip
    # an erasure cancels the job first: one interrupted after that still hides the session
    for sid in ("erased", "half-erased"):
        coord.jobs.cancel_job("t", ids.job_id("t", "s", sid), "erased while being ingested")
    found = pending_sessions(ctx.store, coord.jobs, coord.sequence, "t", "s")
    assert [s.session_id for s in found] == ["queued", "accepted"]
    coord.close()


@pytest.mark.parametrize("mode", ["full", "flat"])
def test_search_returns_pending_turns_beside_the_facts_and_never_twice(
    tmp_path: Path, mode: str
) -> None:
    ctx = make_ctx(tmp_path, TableEncoder({"Where does Priya live?": Q}))
    index = ctx.index("t", "s")
    fact = stored_fact("f1", "Priya lives in Boston.", turn="s1:1")
    index.put_fact(fact, Q)
    committing = SessionInput(
        session_id="s1",
        started_at=datetime(2023, 5, 8, 12, 0),
        participants=["Priya"],
        turns=[Turn(speaker="Priya", text="Hello."), Turn(speaker="Priya", text="Boston!")],
    )
    ctx.embedder.table.update({"Priya: Hello.": unit(0, 0, 1, 0), "Priya: Boston!": Q})  # type: ignore[attr-defined]
    result = search(ctx, "t", "s", "Where does Priya live?", mode=mode, pending=[committing])  # type: ignore[arg-type]
    assert [h.fact.id for h in result.hits] == ["f1"]
    assert result.pending == []  # s1:1 is the fact's source; s1:0 scores under the floor
    fresh = _session("s2", 8, [("Priya", "Boston!")])
    wire = search_response(
        search(ctx, "t", "s", "Where does Priya live?", mode=mode, pending=[fresh])  # type: ignore[arg-type]
    ).model_dump(mode="json")
    assert [h["fact_id"] for h in wire["hits"]] == ["f1"]
    (turn,) = wire["pending"]
    assert turn["status"] == "pending" and turn["session_id"] == "s2"
    assert turn["turn_id"] == "s2:0" and turn["position"] == 0 and turn["speaker"] == "Priya"
    assert turn["text"] == "Boston!" and turn["time"] == "2024-05-08T09:00:00"
    assert turn["score"] >= 0.7 and wire["pending_cut"] == 0
    calls = ctx.embedder.calls  # type: ignore[attr-defined]
    search(ctx, "t", "s", "Where does Priya live?", mode=mode, pending=[fresh])  # type: ignore[arg-type]
    assert ctx.embedder.calls == calls + 1  # type: ignore[attr-defined]  # the question only


def test_an_answer_uses_pending_turns_after_the_facts(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, TableEncoder({"What does Priya cook?": Q}), scripted=False)
    pending = _session("s9", 9, [("Priya", "I cook paella every Sunday.")])
    ctx.embedder.table["Priya: I cook paella every Sunday."] = Q  # type: ignore[attr-defined]
    result = ask(ctx, "t", "s", "What does Priya cook?", pending=[pending])
    assert result.answer.fact_ids == ["pending:s9:s9:0"]
    assert "paella" in result.answer.text


def test_the_command_line_prints_pending_turns_after_the_facts(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from cli.output import print_hits

    turn = PendingTurn(
        session_id="s9",
        turn_id="s9:2",
        position=2,
        speaker="Ann",
        text="I moved to Oslo.",
        time=datetime(2024, 6, 1),
        score=0.61,
    )
    found = SearchResponse(
        question="q", intent=QueryIntent(), hits=[], profiles=[], events=[], timings_ms={}
    )
    print_hits(found.model_copy(update={"pending": [turn], "pending_cut": 7}))
    out = capsys.readouterr().out
    assert "not yet in memory" in out
    assert "pending 0.610  Ann: I moved to Oslo.  [s9:s9:2]" in out
    assert "7 pending turns" in out


def test_an_answer_about_a_trait_leads_with_the_profile_in_force_then(tmp_path: Path) -> None:
    from common.models.memory import Profile, ProfileVersion

    question = "Where does Priya live?"
    ctx = make_ctx(tmp_path, TableEncoder({question: Q}), scripted=False)
    index = ctx.index("t", "s")
    index.put_fact(stored_fact("f1", "Priya lives in Boston.", ["boston"]), Q)
    boston = ProfileVersion(
        content="Priya lives in Boston.", keywords=["boston"], evidence_fact_ids=["f1"],
        t_from=datetime(2023, 5, 8).date(), t_to=datetime(2024, 6, 2).date(),
    )  # fmt: skip
    profile = Profile(
        id="p1", tenant="t", space="s", person="Priya", content="Priya lives in Denver.",
        keywords=["denver"], evidence_fact_ids=["f2"], t_from=datetime(2024, 6, 2).date(),
        history=[boston],
    )  # fmt: skip
    index.put_profile(profile, Q)
    now = ask(ctx, "t", "s", question, now=datetime(2024, 7, 1, 12, 0))
    assert now.answer.text == "Priya lives in Denver." and now.answer.fact_ids == ["profile:p1"]
    then = ask(ctx, "t", "s", question, now=datetime(2024, 1, 1, 12, 0))
    assert then.answer.text == "Priya lives in Boston." and then.answer.fact_ids == ["profile:p1"]
    # a question asking when is answered from the facts' dates, not led by the profile
    when = ask(ctx, "t", "s", "When did Priya live in Boston?", now=datetime(2024, 7, 1))
    assert "profile:p1" not in when.answer.fact_ids


def _trait(index: Any, pid: str, content: str, since: datetime, vector: np.ndarray) -> None:
    from common.models.memory import Profile

    index.put_profile(
        Profile(
            id=pid, tenant="t", space="s", person="Priya", content=content,
            keywords=[], evidence_fact_ids=[], t_from=since.date(),
        ),
        vector,
    )  # fmt: skip


def test_of_two_traits_in_force_about_as_relevant_the_newer_leads(tmp_path: Path) -> None:
    question = "What does Priya do for work?"
    ctx = make_ctx(tmp_path, TableEncoder({question: Q}), scripted=False)
    index = ctx.index("t", "s")
    # two separate profiles (no history joins them), equally close to the question
    _trait(index, "p-boston", "Priya works as a nurse in Boston.", datetime(2024, 3, 4), Q)
    _trait(index, "p-denver", "Priya works as a nurse in Denver.", datetime(2024, 6, 2), Q)
    _trait(index, "p-far", "Priya started pottery.", datetime(2024, 9, 1), unit(0, 0, 1, 0))
    now = ask(ctx, "t", "s", question, now=datetime(2024, 10, 1, 12, 0))
    assert now.answer.fact_ids == ["profile:p-denver"]  # not the later, unrelated pottery
    then = ask(ctx, "t", "s", question, now=datetime(2024, 4, 1, 12, 0))
    assert then.answer.fact_ids == ["profile:p-boston"]  # Denver did not hold yet


def test_a_fact_that_answers_better_than_any_profile_is_not_led_by_one(tmp_path: Path) -> None:
    question = "What hobby did Priya start in a class?"
    ctx = make_ctx(tmp_path, TableEncoder({question: Q}), scripted=False)
    index = ctx.index("t", "s")
    index.put_fact(stored_fact("f1", "Priya started a pottery class.", ["pottery"]), Q)
    _trait(index, "p-work", "Priya works as a nurse.", datetime(2024, 3, 4), unit(1, 1, 1, 0))
    answered = ask(ctx, "t", "s", question, now=datetime(2024, 10, 1, 12, 0))
    assert answered.search.intent.needs_profile  # "hobby": a question about a trait
    assert answered.answer.fact_ids == ["f1"]


def test_a_fact_of_a_version_no_longer_in_force_does_not_outrank_the_profile(
    tmp_path: Path,
) -> None:
    """The old home's own fact matches 'Where does Priya live?' best, but the profile in
    force says where she lives now: the answer leads with it; asked before the move, the old
    fact is the one in force and still answers."""
    from common.models.memory import Profile, ProfileVersion

    question = "Where does Priya live?"
    ctx = make_ctx(tmp_path, TableEncoder({question: Q}), scripted=False)
    index = ctx.index("t", "s")
    index.put_fact(stored_fact("f1", "Priya lives in Boston.", ["boston"]), Q)
    moved = "Priya moved to Denver with her cat Mochi."
    index.put_fact(stored_fact("f2", moved, ["denver"]), unit(0, 1, 0, 0))
    boston = ProfileVersion(
        content="Priya lives in Boston.", keywords=["boston"], evidence_fact_ids=["f1"],
        t_from=datetime(2023, 5, 8).date(), t_to=datetime(2024, 6, 2).date(),
    )  # fmt: skip
    profile = Profile(
        id="p1", tenant="t", space="s", person="Priya", content=moved, keywords=["denver"],
        evidence_fact_ids=["f2"], t_from=datetime(2024, 6, 2).date(), history=[boston],
    )  # fmt: skip
    index.put_profile(profile, unit(0, 1, 0, 0))
    now = ask(ctx, "t", "s", question, now=datetime(2024, 7, 1, 12, 0))
    assert now.answer.text == moved and now.answer.fact_ids == ["profile:p1"]
    then = ask(ctx, "t", "s", question, now=datetime(2024, 1, 1, 12, 0))
    assert then.answer.fact_ids[0] in {"profile:p1", "f1"} and "Boston" in then.answer.text
