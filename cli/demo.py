"""`atommem demo`: the bundled sample conversation into a fresh store, answered from memory."""

from __future__ import annotations

import argparse
import shutil
from importlib import resources
from pathlib import Path

from cli.context import embedded, local
from cli.output import print_profile
from common.errors import InvalidInput
from common.inputs.formats import read_sessions
from common.memory.changes import CommitStats

DEMO_QUESTIONS = [
    "Where does Priya live?",
    "When did Tom adopt his puppy?",
    "What does Priya do for work?",
    "What hobby did Priya start in a class?",
    "Where did Priya go hiking in May 2024?",
    "What is Tom training for?",
]


def cmd_demo(args: argparse.Namespace) -> int:
    """Ingest the bundled sample conversation into a fresh store and answer from memory."""
    data_dir = Path(args.data_dir or ".atommem/demo")
    if data_dir.exists():
        shutil.rmtree(data_dir)
    args.data_dir = str(data_dir)
    sample = resources.files("cli").joinpath("samples/sample_conversation.json")
    with resources.as_file(sample) as path:
        data = read_sessions(Path(path))
    mem = local(args)
    if not embedded():
        raise InvalidInput("the demo runs on embedded defaults: unset ATOMMEM_BROKER__URL")
    space = data.space or "demo"
    mem.create_space(space)
    print(f"== Ingesting {len(data.sessions)} sessions into space {space!r} (store: {data_dir})")
    jobs = mem.add_many([(space, s) for s in data.sessions])
    for session, job in zip(data.sessions, mem.wait([j.job_id for j in jobs]), strict=True):
        s = CommitStats.model_validate(job.counts)
        print(
            f"  {session.session_id} ({session.started_at:%Y-%m-%d}) job {job.state}: "
            f"{s.turns} turns -> {s.facts_stored} facts stored, {s.duplicates_dropped} "
            f"duplicates, {s.updates} updates, {s.events_created} events created, "
            f"{s.profile_changes} profile changes"
        )
    print("\n== Facts")
    for fact in mem.get_all(space, "facts"):  # in session order
        print(f"  - {fact.text}  [{','.join(fact.all_turn_ids())}]")
    print("\n== Events")
    for event in mem.get_all(space, "events"):
        print(f"  * {event.summary}  ({len(event.fact_ids)} facts)")
    print("\n== Profiles (with earlier versions)")
    for profile in sorted(mem.get_all(space, "profiles"), key=lambda p: (p.person, p.t_from)):
        print_profile(profile)
    print("\n== Questions")
    for question in DEMO_QUESTIONS:
        result = mem.ask(space, question)
        print(f"Q: {question}\nA: {result.answer}")
        for hit in result.hits[:3]:
            print(f"     evidence {hit.score:.3f}: {hit.text} [{','.join(hit.turn_ids)}]")
        for used in result.profiles[:2]:
            print(f"     profile {used.person} (valid from {used.valid_from}): {used.content}")
    print(
        "\nThe offline `rules` backend answered extractively; configure an LLM backend for "
        "generated answers."
    )
    return 0
