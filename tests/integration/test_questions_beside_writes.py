"""Questions beside writes, as a chat product runs them: two clients keep asking about a
space through a real worker process (the store's owner, with query slots) while the space
ingests a conversation and then loses sessions and facts to erasures. Every question is
answered, and a fact erased does not come back."""

from __future__ import annotations

import random
import threading
from pathlib import Path

import pytest

from bench.locomo import load_conversations
from tests.helpers.workers import ALL_QUEUES, create_spaces, producer, worker_env
from workers.launch import WorkerProcess

pytestmark = pytest.mark.integration

SPACE = "talk"


def test_questions_are_answered_while_the_space_ingests_and_erases(
    tmp_path: Path, redis_url: str, locomo: Path
) -> None:
    (conv,) = load_conversations(locomo / "conversations", locomo / "atommem_facts", ["conv-26"])
    sessions = conv.sessions.sessions[:12]
    questions = [qa["question"] for _, qa in conv.questions]
    create_spaces(tmp_path, [SPACE])
    env = worker_env(redis_url, tmp_path) | {"ATOMMEM_BROKER__QUERY_CONCURRENCY": "2"}
    worker = WorkerProcess(env, tmp_path / "worker.log", ALL_QUEUES, concurrency=2)
    worker.wait_ready()
    client = producer(redis_url)
    done = threading.Event()
    failures: list[str] = []
    answered = [0, 0]

    def ask(slot: int) -> None:
        rnd = random.Random(slot)
        while not done.is_set():
            question = rnd.choice(questions)
            try:
                found = client.search(
                    "default", SPACE, question, explain=rnd.random() < 0.5, profiles=True
                )
            except Exception as exc:  # noqa: BLE001 - every failure is the test's finding
                failures.append(f"{question!r}: {exc!r}")
                continue
            answered[slot] += bool(found.hits)

    try:
        first = client.submit("default", SPACE, sessions[:2])
        assert all(j.state == "done" for j in client.wait("default", [j.job_id for j in first]))
        askers = [threading.Thread(target=ask, args=(slot,)) for slot in (0, 1)]
        for asker in askers:
            asker.start()
        try:
            rest = client.submit("default", SPACE, sessions[2:])
            jobs = client.wait("default", [j.job_id for j in rest], timeout=600)
            assert all(j.state == "done" for j in jobs), [j.reason for j in jobs]
            for session in sessions[2::4]:
                client.erase("default", SPACE, "erase_session", session.session_id)
            erased: list[str] = []  # facts the questions return now
            for question in questions:
                hits = client.search("default", SPACE, question).hits
                erased.extend(h.fact_id for h in hits if h.fact_id not in erased)
                if len(erased) >= 15:
                    break
            for fact_id in erased:
                client.erase("default", SPACE, "erase_fact", fact_id)
        finally:
            done.set()
            for asker in askers:
                asker.join(120)
        assert not failures, failures[:3]
        assert all(answered), answered  # each client's questions found facts
        after: set[str] = set()
        for question in questions[:40]:
            after.update(h.fact_id for h in client.search("default", SPACE, question).hits)
        assert after and not after & set(erased)
    finally:
        worker.stop()
