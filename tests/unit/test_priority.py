"""Questions first inside a process (common/priority.py): background checkpoints wait while a
question is in flight, never on the question's own thread, and never past the longest wait."""

from __future__ import annotations

import threading
import time

from common.priority import QuestionsFirst


def _checkpoint_on_a_thread(gate: QuestionsFirst) -> tuple[threading.Thread, threading.Event]:
    passed = threading.Event()

    def background() -> None:
        gate.checkpoint()
        passed.set()

    thread = threading.Thread(target=background)
    thread.start()
    return thread, passed


def test_a_checkpoint_waits_for_the_question_in_flight_and_goes_on_when_it_ends() -> None:
    gate = QuestionsFirst(longest_wait=30)
    with gate.answering():
        thread, passed = _checkpoint_on_a_thread(gate)
        assert not passed.wait(0.2)  # held while the question runs
    assert passed.wait(5)  # released as soon as it ends, long before the longest wait
    thread.join()
    assert gate.yielded_s > 0.15


def test_a_checkpoint_with_no_question_in_flight_does_not_wait() -> None:
    gate = QuestionsFirst(longest_wait=30)
    with gate.answering():
        pass
    thread, passed = _checkpoint_on_a_thread(gate)
    assert passed.wait(5)
    thread.join()
    assert not gate.busy and gate.yielded_s == 0


def test_a_question_never_waits_on_its_own_checkpoints() -> None:
    """A question's own encodes pass the embedder's checkpoints: waiting there would wait
    for itself."""
    gate = QuestionsFirst(longest_wait=30)
    with gate.answering():
        began = time.perf_counter()
        gate.checkpoint()
        assert time.perf_counter() - began < 1
    assert gate.yielded_s == 0


def test_background_work_is_slowed_by_a_stream_of_questions_never_stopped() -> None:
    gate = QuestionsFirst(longest_wait=0.05)
    with gate.answering():  # a question that outlasts every wait
        thread, passed = _checkpoint_on_a_thread(gate)
        assert passed.wait(5)  # after the longest wait, with the question still running
        assert gate.busy
    thread.join()


def test_overlapping_questions_hold_background_work_until_the_last_one_ends() -> None:
    gate = QuestionsFirst(longest_wait=30)
    first, second = threading.Event(), threading.Event()
    both_in = threading.Barrier(3)

    def question(done: threading.Event) -> None:
        with gate.answering():
            both_in.wait(10)
            done.wait(10)

    threads = [threading.Thread(target=question, args=(e,)) for e in (first, second)]
    for t in threads:
        t.start()
    both_in.wait(10)
    background, passed = _checkpoint_on_a_thread(gate)
    first.set()
    threads[0].join()
    assert not passed.wait(0.2)  # the second question still runs
    second.set()
    assert passed.wait(5)
    for t in [threads[1], background]:
        t.join()
