"""How the command line prints search results, answers, profiles and model usage."""

from __future__ import annotations

import argparse
from collections.abc import Mapping

from common.llm import usage
from common.models.memory import Event, Fact, Profile
from common.models.query import AskResponse, SearchResponse


def print_fact(fact: Fact) -> None:
    when = f" [{fact.time.event.start}..{fact.time.event.end}]" if fact.time.event else ""
    turns = ",".join(fact.all_turn_ids())
    print(f"- {fact.text}{when}  ({turns}; {', '.join(fact.keywords)})")
    for rev in fact.history:
        by = f"replaced in {rev.replaced_by_session}"
        if rev.correction is not None:
            by = f"corrected {rev.correction.at:%Y-%m-%d}: {rev.correction.reason or 'no reason'}"
        print(f"    was: {rev.text} ({by})")


def print_event(event: Event, facts: Mapping[str, Fact]) -> None:
    """The event and the text of each member fact still stored."""
    span = f" [{event.time_span.start}..{event.time_span.end}]" if event.time_span else ""
    print(f"* {event.summary}{span}  ({len(event.fact_ids)} facts)")
    for fid in event.fact_ids:
        if fid in facts:
            print(f"    - {facts[fid].text}")


def print_profile(profile: Profile) -> None:
    print(f"* {profile.person}: {profile.content}  (since {profile.t_from})")
    for version in profile.history:
        print(f"    {version.t_from} .. {version.t_to}: {version.content}")


def print_hits(result: SearchResponse, limit: int | None = None) -> None:
    for rank, hit in enumerate(result.hits[:limit], 1):
        print(f"  {rank:2d}. {hit.score:.3f}  {hit.text}  [{','.join(hit.turn_ids)}]")
    for profile in result.profiles[:limit]:
        print(f"  profile {profile.person} (valid from {profile.valid_from}): {profile.content}")
    if result.pending:
        print("  not yet in memory (sessions still being ingested):")
    for turn in result.pending[:limit]:
        where = f"{turn.session_id}:{turn.turn_id}"
        print(f"   pending {turn.score:.3f}  {turn.speaker}: {turn.text}  [{where}]")
    if result.pending_cut:
        print(f"  ({result.pending_cut} pending turns of a long backlog were not searched)")


# What `--json` prints: what the text shows (the question aside), as one JSON object.
SHOWN = {"hits", "profiles", "pending", "pending_cut"}
ANSWERED = SHOWN | {"answer", "answer_fact_ids", "llm_usage"}


def show_search(args: argparse.Namespace, result: SearchResponse) -> int:
    if args.json:
        print(result.model_dump_json(include=SHOWN))
        return 0
    print(f"Q: {args.question}")
    print_hits(result)
    return 0


def show_answer(args: argparse.Namespace, result: AskResponse) -> int:
    if args.json:
        print(result.model_dump_json(include=ANSWERED))
        return 0
    print(f"Q: {args.question}\nA: {result.answer}")
    line = usage_line(result.llm_usage)
    if line:
        print(f"  ({line})")
    print("  evidence:")
    print_hits(result)
    return 0


def usage_line(counts: dict[str, int]) -> str:
    """`llm: 12 calls (3 skipped), 4,210 prompt + 512 completion tokens`, or "" when none."""
    spent = usage.Usage.from_counts(counts)
    if not spent.total("calls"):
        return ""  # the `rules` backend: no model calls to report
    return (
        f"llm: {spent.total('calls')} calls ({spent.total('skipped')} skipped), "
        f"{spent.total('prompt_tokens'):,} prompt + "
        f"{spent.total('completion_tokens'):,} completion tokens"
    )
