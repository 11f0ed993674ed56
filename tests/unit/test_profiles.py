"""Temporal profiles: validity intervals of update_current / modify_history and the batch."""

from __future__ import annotations

from datetime import date, datetime
from pathlib import Path

from common.llm.contracts import ProfileCandidate
from common.memory.commit import commit_facts, profile_batch
from common.memory.profiles import modify_history, update_current
from common.models.memory import Profile, ProfileVersion
from tests.helpers.contexts import make_ctx
from tests.helpers.doubles import TableEncoder, unit
from tests.helpers.records import draft, session_record


def _profile(content: str, t_from: date, history: list[ProfileVersion] | None = None) -> Profile:
    return Profile(
        id="p1",
        tenant="t",
        space="s",
        person="Ann",
        content=content,
        keywords=["live"],
        evidence_fact_ids=["f0"],
        t_from=t_from,
        history=history or [],
    )


def _cand(content: str, day: date, fact_id: str = "f9") -> ProfileCandidate:
    return ProfileCandidate(
        person="Ann",
        content=content,
        keywords=["live"],
        fact_id=fact_id,
        valid_from=datetime.combine(day, datetime.min.time()),
    )


def test_update_current_closes_the_old_version_where_the_new_begins() -> None:
    p = update_current(
        _profile("Ann lives in Boston.", date(2024, 3, 4)),
        _cand("Ann lives in Denver.", date(2024, 6, 2)),
        "Ann lives in Denver.",
    )
    assert (p.content, p.t_from, p.evidence_fact_ids) == (
        "Ann lives in Denver.",
        date(2024, 6, 2),
        ["f9"],
    )
    (old,) = p.history
    assert (old.content, old.t_from, old.t_to) == (
        "Ann lives in Boston.",
        date(2024, 3, 4),
        date(2024, 6, 2),
    )
    assert p.version_at(date(2024, 6, 1)) == old
    assert p.version_at(date(2024, 6, 2)) is p
    assert p.version_at(date(2024, 3, 3)) is None


def test_modify_history_prepends_a_state_before_all_known_ones() -> None:
    p = modify_history(
        _profile("Ann lives in Denver.", date(2024, 6, 2)),
        _cand("Ann lived in Austin.", date(2020, 1, 1)),
        "Ann lived in Austin.",
    )
    assert p.content == "Ann lives in Denver."
    (v,) = p.history
    assert (v.content, v.t_from, v.t_to) == (
        "Ann lived in Austin.",
        date(2020, 1, 1),
        date(2024, 6, 2),
    )


def test_modify_history_splits_the_version_that_covered_the_day() -> None:
    boston = ProfileVersion(
        content="Boston",
        keywords=[],
        evidence_fact_ids=["f1"],
        t_from=date(2020, 1, 1),
        t_to=date(2024, 6, 2),
    )
    p = modify_history(
        _profile("Denver", date(2024, 6, 2), [boston]),
        _cand("Chicago", date(2022, 1, 1)),
        "Chicago",
    )
    got = [(v.content, v.t_from, v.t_to) for v in p.history]
    assert got == [
        ("Boston", date(2020, 1, 1), date(2022, 1, 1)),
        ("Chicago", date(2022, 1, 1), date(2024, 6, 2)),
    ]
    assert p.version_at(date(2023, 5, 1)).content == "Chicago"  # type: ignore[union-attr]
    assert p.version_at(date(2021, 5, 1)).content == "Boston"  # type: ignore[union-attr]


def test_modify_history_on_the_first_day_of_a_version_replaces_it() -> None:
    boston = ProfileVersion(
        content="Boston",
        keywords=[],
        evidence_fact_ids=["f1"],
        t_from=date(2020, 1, 1),
        t_to=date(2024, 6, 2),
    )
    p = modify_history(
        _profile("Denver", date(2024, 6, 2), [boston]),
        _cand("Cambridge", date(2020, 1, 1)),
        "Cambridge",
    )
    assert [(v.content, v.t_from, v.t_to) for v in p.history] == [
        ("Cambridge", date(2020, 1, 1), date(2024, 6, 2))
    ]


def test_batch_creates_then_updates_with_history_and_clears_pending(tmp_path: Path) -> None:
    boston, denver = "Ann lives in Boston.", "Ann lives in Denver."
    encoder = TableEncoder({boston: unit(1, 0, 0, 0), denver: unit(0.8, 0.6, 0, 0)})
    ctx = make_ctx(tmp_path, encoder, scripted=False)
    r1 = session_record("s1", 0, datetime(2024, 3, 4, 10), ["Ann"])
    commit_facts(
        ctx, r1, [draft(r1, boston, unit(1, 0, 0, 0), ["live", "boston"], ["Ann"], profile=True)]
    )
    s1 = profile_batch(ctx, r1)
    assert s1.profile_changes == 1
    r2 = session_record("s2", 1, datetime(2024, 6, 2, 10), ["Ann"])
    commit_facts(
        ctx,
        r2,
        [draft(r2, denver, unit(0.8, 0.6, 0, 0), ["live", "denver"], ["Ann"], profile=True)],
    )
    s2 = profile_batch(ctx, r2)
    # the candidates call and the update decision were both asked, neither skipped
    assert s2.profile_changes == 1 and s2.llm_calls_skipped == 0
    (profile,) = ctx.index("t", "s").profiles.items()
    assert (profile.content, profile.t_from) == (denver, date(2024, 6, 2))
    assert [(h.content, h.t_from, h.t_to) for h in profile.history] == [
        (boston, date(2024, 3, 4), date(2024, 6, 2))
    ]
    assert not any(f.profile_pending for f in ctx.index("t", "s").facts.items())
    # reloading from the store gives the same profile
    ctx.indexes.drop("t", "s")
    assert ctx.index("t", "s").profiles.items() == [profile]


def test_a_move_in_other_words_is_the_next_version_of_where_one_lives(tmp_path: Path) -> None:
    """Residence is a slot: a later statement of it replaces the person's current one even
    when the two share too little to be ranked together, and keeps what else it said; where
    a person comes from is not a slot and stays a profile of its own."""
    boston = "Ann lives in Boston, close to the harbor."
    denver = "Ann moved to Denver last month with her cat Mochi."
    ohio = "Ann is from Ohio."
    ctx = make_ctx(tmp_path, scripted=False)
    r1 = session_record("s1", 0, datetime(2024, 1, 10, 10), ["Ann"])
    commit_facts(ctx, r1, [draft(r1, boston, unit(1, 0, 0, 0), ["boston"], ["Ann"], profile=True)])
    profile_batch(ctx, r1)
    r2 = session_record("s2", 1, datetime(2024, 6, 2, 10), ["Ann"])
    drafts = [
        draft(r2, denver, unit(0, 1, 0, 0), ["denver", "mochi"], ["Ann"], profile=True),
        draft(r2, ohio, unit(0, 0, 1, 0), ["ohio"], ["Ann"], index=1, profile=True),
    ]
    commit_facts(ctx, r2, drafts)
    assert profile_batch(ctx, r2).profile_changes == 2
    index = ctx.index("t", "s")
    home, origin = sorted(index.profiles.items(), key=lambda p: p.content != denver)
    assert (home.content, home.slot, origin.content, origin.slot) == (
        denver, "residence", ohio, None
    )  # fmt: skip
    assert [h.content for h in home.history] == [boston]
    assert home.as_of(date(2024, 3, 1)).content == boston  # type: ignore[union-attr]
    ctx.indexes.drop("t", "s")
    assert ctx.index("t", "s").profiles.get(home.id).slot == "residence"


def test_batch_with_nothing_pending_makes_no_call(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, scripted=False)
    rec = session_record("s1", 0, datetime(2024, 3, 4), ["Ann"])
    stats = profile_batch(ctx, rec)
    assert stats.llm_calls == 0 and stats.llm_calls_skipped == 1


def test_the_pending_facts_are_kept_apart_in_the_order_they_were_said(tmp_path: Path) -> None:
    """The batch finds its candidates without reading every fact of the space: the index
    keeps them, in the order they were said (session, turn, id) whatever the order of its
    rows (a reload reads them in the store's), and drops them when their batch clears them
    or they are removed."""
    ctx = make_ctx(tmp_path, scripted=False)
    first = session_record("s1", 0, datetime(2024, 3, 4, 10), ["Ann"])
    second = session_record("s2", 1, datetime(2024, 3, 5, 10), ["Ann"])
    texts = ["Ann lives in Boston.", "Ann likes tea.", "Ann met Bo.", "Ann loves jazz."]
    # committed turns out of order, the later session first
    commit_facts(
        ctx,
        second,
        [draft(second, "Ann plays chess.", unit(1, 1, 0, 0), ["k"], ["Ann"], profile=True)],
    )
    drafts = [
        draft(
            first,
            t,
            unit(*[float(i == j) for j in range(4)]),
            ["k"],
            ["Ann"],
            index=3 - i,
            profile=i != 2,
        )
        for i, t in enumerate(texts)
    ]
    commit_facts(ctx, first, drafts)
    index = ctx.index("t", "s")
    said = ["Ann loves jazz.", "Ann likes tea.", "Ann lives in Boston.", "Ann plays chess."]
    assert [f.text for f in index.profile_pending()] == said
    order = [f.id for f in index.profile_pending()]
    index.remove_fact(order[1])
    assert [f.id for f in index.profile_pending()] == [order[0], *order[2:]]
    ctx.indexes.drop("t", "s")
    reloaded = ctx.index("t", "s")  # from the store (which still holds the one removed
    # from the index): its rows in the store's order
    assert [f.id for f in reloaded.profile_pending()] == order
    profile_batch(ctx, second)
    assert ctx.index("t", "s").profile_pending() == []


def test_a_profile_as_of_a_day_reads_as_it_stood_then() -> None:
    boston = ProfileVersion(
        content="Ann lives in Boston.", keywords=["boston"], evidence_fact_ids=["f1"],
        t_from=date(2024, 1, 1), t_to=date(2024, 3, 1),
    )  # fmt: skip
    austin = ProfileVersion(
        content="Ann lives in Austin.", keywords=["austin"], evidence_fact_ids=["f2"],
        t_from=date(2024, 3, 1), t_to=date(2024, 6, 2),
    )  # fmt: skip
    profile = _profile("Ann lives in Denver.", date(2024, 6, 2), [boston, austin])
    april = profile.as_of(date(2024, 4, 15))
    assert april is not None and april.content == "Ann lives in Austin."
    assert april.t_from == date(2024, 3, 1) and april.evidence_fact_ids == ["f2"]
    assert april.history == [boston]  # only what came before it
    assert profile.as_of(date(2024, 6, 2)) is profile
    assert profile.as_of(date(2023, 12, 31)) is None  # it did not hold yet
