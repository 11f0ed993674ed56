"""Listings narrowed on the server, through the SDK against `atommem serve`: facts by words of
their text, by the sessions they came from, by their events and by ids; events in time order
and by words; profiles by words of any version; jobs by state past the newest, a page at a
time. Each answer is checked against the whole listing filtered here."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date

import httpx
import pytest

from api.client import AtomMem, InvalidError
from common.errors import InvalidInput
from common.models.api import ListingFilter
from common.models.memory import Fact
from tests.helpers.browser import sessions
from tests.helpers.serve import Served, serving

pytestmark = pytest.mark.integration

SPACE = "alice"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serving(tmp_path_factory.mktemp("listings") / "data") as running:
        with AtomMem(running.url, running.key()) as mem:
            mem.create_space(SPACE)
            jobs = [mem.add(SPACE, body) for body in sessions()]
            done = mem.wait([j.job_id for j in jobs], timeout=300)
            assert [j.state for j in done] == ["done"] * len(jobs)
        yield running


@pytest.fixture
def mem(served: Served) -> Iterator[AtomMem]:
    with AtomMem(served.url, served.key()) as client:
        yield client


def came_from(fact: Fact) -> set[str]:
    return {fact.source.session_id, *(p.session_id for p in fact.also_from)}


def test_facts_by_words_of_their_text(mem: AtomMem) -> None:
    every = mem.get_all(SPACE)
    narrow = ListingFilter(text="PRIYA  lives")
    found = mem.get_all(SPACE, narrow=narrow)
    expected = [f for f in every if "priya" in f.text.casefold() and "lives" in f.text.casefold()]
    assert found and [f.id for f in found] == [f.id for f in expected]  # session order kept
    page = mem.page(SPACE, "facts", limit=1, offset=1, narrow=narrow)
    assert page.total == len(expected) and [f.id for f in page.items] == [expected[1].id]
    assert mem.get_all(SPACE, narrow=ListingFilter(text="zeppelin")) == []


def test_facts_by_the_sessions_they_came_from(mem: AtomMem) -> None:
    every = mem.get_all(SPACE)
    for session_id in ("s1", "s3", "s5"):
        found = mem.get_all(SPACE, narrow=ListingFilter(session_ids=[session_id]))
        assert {f.id for f in found} == {f.id for f in every if session_id in came_from(f)}
    # s5 updated a fact s3 stated, and repeated one of s1: both are s5's too
    of_s5 = mem.get_all(SPACE, narrow=ListingFilter(session_ids=["s5"]))
    assert {f.source.session_id for f in of_s5} >= {"s1", "s3", "s5"}
    both = mem.get_all(SPACE, narrow=ListingFilter(session_ids=["s1", "s2"]))
    assert {f.id for f in both} == {f.id for f in every if came_from(f) & {"s1", "s2"}}


def test_facts_by_event_and_by_id(mem: AtomMem) -> None:
    events = mem.get_all(SPACE, "events")
    biggest = max(events, key=lambda e: len(e.fact_ids))
    members = mem.get_all(SPACE, narrow=ListingFilter(event_ids=[biggest.id]))
    assert {f.id for f in members} == set(biggest.fact_ids)
    some = [f.id for f in mem.get_all(SPACE)[:3]]
    by_id = mem.get_all(SPACE, narrow=ListingFilter(ids=[*some, "no-such-fact"]))
    assert sorted(f.id for f in by_id) == sorted(some)
    narrower = ListingFilter(event_ids=[biggest.id], text=members[0].text.split()[-1])
    assert {f.id for f in mem.get_all(SPACE, narrow=narrower)} <= set(biggest.fact_ids)


def test_events_come_in_time_order_and_by_words(mem: AtomMem) -> None:
    events = mem.get_all(SPACE, "events")
    starts = [e.time_span.start if e.time_span else date.max for e in events]
    assert starts == sorted(starts)
    zion = mem.get_all(SPACE, "events", narrow=ListingFilter(text="zion"))
    assert zion and all("zion" in (e.summary + " " + " ".join(e.keywords)).casefold() for e in zion)


def test_profiles_by_words_of_any_version(mem: AtomMem) -> None:
    moved = [p for p in mem.get_all(SPACE, "profiles") if p.history]
    assert moved, "the sample's Priya moved: her home profile has an earlier version"
    home = next(p for p in moved if "Boston" in p.history[0].content)
    assert "Boston" not in home.content
    found = mem.get_all(SPACE, "profiles", narrow=ListingFilter(text="boston"))
    assert home.id in {p.id for p in found}
    persons = [p.person for p in mem.get_all(SPACE, "profiles")]
    assert persons == sorted(persons)  # by person, then when each first held


def test_a_filter_a_listing_does_not_take_is_refused(mem: AtomMem, served: Served) -> None:
    with pytest.raises(InvalidInput, match="only a listing of facts"):  # before it is sent
        mem.page(SPACE, "events", narrow=ListingFilter(session_ids=["s1"]))
    url, headers = (
        f"{served.url}/v1/spaces/{SPACE}/facts",
        {"Authorization": f"Bearer {served.key()}"},
    )
    blank = httpx.get(url, params={"text": "   "}, headers=headers)
    assert blank.status_code == 422 and "give a word" in blank.json()["detail"], blank.text
    many = httpx.get(url, params={"id": ["x"] * 201, "limit": 0}, headers=headers)
    assert many.status_code == 422, many.text
    assert "query.id" in many.json()["detail"] and "query.limit" in many.json()["detail"]


def test_jobs_by_state_past_the_newest_a_page_at_a_time(mem: AtomMem) -> None:
    newest = mem.jobs(SPACE, limit=5)
    assert len(newest) == len(sessions())
    assert [j.job_id for j in mem.jobs(SPACE, limit=2, offset=1)] == [j.job_id for j in newest[1:3]]
    assert [j.job_id for j in mem.jobs(SPACE, state="done")] == [j.job_id for j in newest]
    assert mem.jobs(SPACE, state="failed") == []
    with pytest.raises(InvalidError, match="state"):
        mem.jobs(SPACE, state="lost")  # type: ignore[arg-type]
