"""A question reads a space while the commit thread writes it (reads never wait for a
write): a write that lands between two of the question's reads neither fails it nor brings
back what it erased. Each test puts the write at one such point, deterministically, and the
first runs the two threads for real."""

from __future__ import annotations

import sys
import threading
import time
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from common.context import MemoryContext
from common.models.jobs import ReadWhat
from common.models.memory import Event, Fact, Profile
from common.retrieval.graph import Channels, LocalGraph
from common.retrieval.search import search
from common.settings import GraphSettings
from common.store.space_index import FactArrays, KindIndex, SpaceIndex
from tests.helpers.contexts import make_ctx
from tests.helpers.doubles import TableEncoder, unit
from tests.helpers.records import turn_fact

CFG = GraphSettings()
QUESTION = "Where does Priya go kayaking?"
Q = unit(1, 0, 0, 0)


def _fact(i: int, keywords: list[str], people: list[str], seq: int, pos: int = 0) -> Fact:
    return turn_fact(i, keywords, people, seq, pos, f"Priya goes kayaking {i}.")


def test_channels_and_fact_arrays_are_built_while_the_commit_thread_rewrites_facts() -> None:
    """A fact rewritten over and over on another thread, each time with a keyword and a
    person of its own, drops the previous ones' postings. Built from the live dicts, a
    posting listed and then looked up after the write dropped it failed the question."""
    index = SpaceIndex(tenant="t", space="s", dimension=2)
    vector = np.array([1.0, 0.0], dtype=np.float32)
    for i in range(300):
        index.put_fact(_fact(i, [f"word{i}", "shared"], [f"P{i % 7}"], i), vector)
    done = threading.Event()
    failed: list[BaseException] = []

    def rewrite() -> None:
        k = 0
        try:
            while not done.is_set():
                k += 1
                index.put_fact(_fact(1000, [f"only{k}"], [f"Q{k}"], 1), vector)
        except BaseException as exc:  # the writer's own failure fails the test
            failed.append(exc)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads often: the race shows within a few builds
    writer = threading.Thread(target=rewrite)
    writer.start()
    builds = 0
    try:
        began = time.monotonic()
        while builds < 200 and time.monotonic() - began < 2.0:
            Channels(index, CFG)
            FactArrays(index.facts)
            builds += 1
    finally:
        done.set()
        writer.join()
        sys.setswitchinterval(interval)
    assert not failed and builds >= 5


def test_a_walk_whose_fact_arrays_were_read_before_a_fact_was_added_reads_them_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The fact arrays kept for the state a question finds can be older than the channels it
    read just before (a fact added in between): the walk reads them again instead of
    indexing them past their end."""
    index = SpaceIndex(tenant="t", space="s", dimension=2)
    vector = np.array([1.0, 0.0], dtype=np.float32)
    for i in range(4):
        index.put_fact(_fact(i, ["kayak" if i == 0 else f"hike{i}"], ["Priya"], i), vector)
    older = index.fact_arrays()
    index.put_fact(_fact(4, ["kayak"], ["Priya"], 4), vector)  # the newest shares the keyword
    expected = LocalGraph(index, ["kayak"], CFG).run([0], np.array([0.9]))
    derived = SpaceIndex.derived

    def kept_older(self: SpaceIndex, name: str, *args: Any) -> Any:
        return older if name == "fact-arrays" else derived(self, name, *args)

    monkeypatch.setattr(SpaceIndex, "derived", kept_older)  # the arrays kept: the older ones
    walked = LocalGraph(index, ["kayak"], CFG).run([0], np.array([0.9]))
    assert walked.rows == expected.rows and 4 in walked.rows
    assert np.allclose(walked.activation, expected.activation)


@pytest.fixture
def ctx(tmp_path: Path) -> MemoryContext:
    """Ten facts of Priya's about kayaking, two events of five and a profile."""
    ctx = make_ctx(tmp_path, TableEncoder({QUESTION: Q}))
    index = ctx.index("t", "s")
    for i in range(10):
        index.put_fact(
            _fact(i, ["kayak", f"lake{i % 3}"], ["Priya"], i // 5, i % 5), unit(1, i, 0, 0)
        )
    for e in range(2):
        event = Event(id=f"e{e}", tenant="t", space="s", summary="Priya goes kayaking.",
                      fact_ids=[f"f{i}" for i in range(5 * e, 5 * e + 5)],
                      participants=["Priya"], keywords=["kayak"])  # fmt: skip
        index.put_event(event, unit(1, e, 0, 0))
    profile = Profile(
        id="p0",
        tenant="t",
        space="s",
        person="Priya",
        content="Priya kayaks.",
        keywords=["kayak"],
        evidence_fact_ids=["f0"],
        t_from=date(2024, 1, 1),
    )
    index.put_profile(profile, unit(1, 0, 0, 0))
    return ctx


def _erasing_after(kind: KindIndex[Any], erase: Any, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """`kind.hybrid` that, once, erases the best row it ranked right after ranking it, as
    the commit thread could; the erased ids."""
    ranked = kind.hybrid
    erased: list[str] = []

    def hybrid(*args: Any, **kwargs: Any) -> Any:
        found = ranked(*args, **kwargs)
        if found and not erased:
            erased.append(found[0].id)
            erase(found[0].id)
        return found

    monkeypatch.setattr(kind, "hybrid", hybrid)
    return erased


@pytest.mark.parametrize("mode", ["full", "no-graph", "flat"])
def test_a_fact_erased_after_the_question_ranked_it_is_not_returned(
    ctx: MemoryContext, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = ctx.index("t", "s")
    erased = _erasing_after(index.facts, index.remove_fact, monkeypatch)
    result = search(ctx, "t", "s", QUESTION, k=10, mode=mode, explain=True, profiles=True)  # type: ignore[arg-type]
    found = {h.fact.id for h in result.hits}
    assert erased and erased[0] not in found and found
    if result.graph is not None:
        assert erased[0] not in {n.fact_id for n in result.graph.nodes}


def test_an_event_erased_after_the_question_ranked_it_is_not_read(
    ctx: MemoryContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = ctx.index("t", "s")
    erased = _erasing_after(index.events, index.remove_event, monkeypatch)
    result = search(ctx, "t", "s", QUESTION, k=10, mode="no-graph")
    assert erased and erased[0] not in {event.id for event, _ in result.events}
    assert result.hits


def test_a_profile_erased_after_the_question_ranked_it_is_not_returned(
    ctx: MemoryContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = ctx.index("t", "s")
    erased = _erasing_after(index.profiles, index.profiles.remove, monkeypatch)
    result = search(ctx, "t", "s", QUESTION, k=10, profiles=True)
    assert erased == ["p0"] and not result.profiles and result.hits


def test_a_fact_erased_after_the_walk_read_it_is_neither_returned_nor_drawn(
    ctx: MemoryContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = ctx.index("t", "s")
    walk = LocalGraph.run
    erased: list[str] = []

    def run(self: LocalGraph, *args: Any) -> Any:
        result = walk(self, *args)
        # the most activated node: one the answer would hold
        node = result.rows[int(np.argmax(result.activation))]
        erased.append(index.facts.ids[node])
        index.remove_fact(erased[0])
        return result

    monkeypatch.setattr(LocalGraph, "run", run)
    result = search(ctx, "t", "s", QUESTION, k=10, mode="full", explain=True)
    assert erased and erased[0] not in {h.fact.id for h in result.hits} and result.hits
    assert result.graph is not None
    assert erased[0] not in {n.fact_id for n in result.graph.nodes}
    assert all(erased[0] not in (e.source, e.target) for e in result.graph.edges)


@pytest.mark.parametrize("what", ["fact", "facts"])
def test_a_listing_or_record_read_while_its_fact_is_erased_returns_no_hole(
    ctx: MemoryContext, what: ReadWhat, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker's read task found a record present, the commit thread erased it, and the read
    then returned None where a fact was due (a reply that could not be built). Here the
    erasure lands right after any presence check of `f1`; the read returns the facts as
    they stand, or says the fact is not there, never a hole."""
    from common.errors import NotFound
    from common.memory.listings import read
    from common.models.api import ListingFilter
    from common.models.jobs import ReadPayload

    index = ctx.index("t", "s")
    present = KindIndex.__contains__

    def erased_after_the_check(self: KindIndex[Any], item_id: object) -> bool:
        found = present(self, item_id)
        if item_id == "f1" and found:
            index.remove_fact("f1")
        return found

    monkeypatch.setattr(KindIndex, "__contains__", erased_after_the_check)
    narrow = ListingFilter(ids=["f1", "f2"]) if what == "facts" else None
    payload = ReadPayload(
        enqueued_at=0.0, tenant="t", what=what, space="s", item_id="f1", narrow=narrow
    )
    try:
        reply = read(ctx, payload)
    except NotFound:
        return
    facts = [reply] if what == "fact" else list(reply.items)  # type: ignore[attr-defined]
    assert facts and all(isinstance(f, Fact) for f in facts)
