"""The query path's waits and set-up: the embedder's OpenMP threads sleep when idle, its
forward pass (ONNX Runtime or PyTorch's modules called directly) gives sentence-transformers'
vectors, and the embedded broker and result store wake their waiter on arrival instead of
polling on an interval."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from celery import Celery, states
from kombu.connection import Connection
from kombu.entity import Exchange
from kombu.entity import Queue as KombuQueue
from kombu.messaging import Producer

from common.embeddings import WAIT_POLICY, Embedder
from common.settings import EmbeddingSettings
from workers.embedded import EmbeddedResults, EmbeddedTransport, embedded_config


@pytest.fixture(scope="module", params=["onnx", "torch"])
def embedder(request: pytest.FixtureRequest) -> Embedder:
    made = Embedder(EmbeddingSettings(runtime=request.param))
    assert made.runtime == request.param
    return made


@pytest.fixture(scope="module")
def reference() -> Any:
    """sentence-transformers' own pipeline over the same weights."""
    from sentence_transformers import SentenceTransformer

    from common.embeddings import packaged_model_path

    return SentenceTransformer(str(packaged_model_path()), device="cpu")


def test_openmp_threads_sleep_when_idle(embedder: Embedder) -> None:
    import os

    assert WAIT_POLICY == "PASSIVE"
    assert os.environ["OMP_WAIT_POLICY"] == WAIT_POLICY


def test_one_batch_matches_sentence_transformers(embedder: Embedder, reference: Any) -> None:
    texts = ["When did Caroline go to the support group?", "hi", "a longer sentence " * 90]
    expected = reference.encode(texts, normalize_embeddings=True, convert_to_numpy=True)
    for i, text in enumerate(texts):
        one = embedder.encode([text])
        assert one.dtype == np.float32 and one.shape == (1, embedder.dimension)
        np.testing.assert_allclose(one[0], expected[i], atol=1e-5)
    np.testing.assert_allclose(embedder.encode(texts), expected, atol=1e-5)


def test_many_texts_come_back_in_their_order(embedder: Embedder, reference: Any) -> None:
    """Texts of many lengths are encoded in slices sorted by length; each row is its text's."""
    texts = [f"question number {i} " + "and more " * (i % 7) for i in range(70)]
    vectors = embedder.encode(texts)
    assert vectors.shape == (len(texts), embedder.dimension)
    expected = reference.encode(texts, normalize_embeddings=True, convert_to_numpy=True)
    np.testing.assert_allclose(vectors, expected, atol=1e-5)


def test_a_question_is_encoded_while_an_ingest_batch_holds_the_model(embedder: Embedder) -> None:
    """A single text does not queue behind the shared encodes: with a batch's pass under
    way (the model's lock held), it is encoded beside it, and equals the batched vector."""
    question = "When did Caroline go to the support group?"
    expected = embedder.encode([question, "and a second text, so that it is batched"])[0]
    done: list[np.ndarray] = []
    with embedder._lock:  # what a leader's pass of the shared encodes holds
        asking = threading.Thread(target=lambda: done.append(embedder.encode([question])))
        asking.start()
        asking.join(30)
        assert done, "the question waited for the batch"
    np.testing.assert_allclose(done[0][0], expected, atol=1e-5)


def test_questions_and_batches_on_many_threads_all_get_their_vectors(
    embedder: Embedder, reference: Any
) -> None:
    """The tokenizer is shared and refuses a second caller inside it: every path takes its
    lock, so concurrent questions and batches never fail."""
    texts = [f"Melanie painted a lake on day {i} of the summer" for i in range(12)]
    expected = reference.encode(texts, normalize_embeddings=True, convert_to_numpy=True)
    failures: list[BaseException] = []
    results: dict[int, np.ndarray] = {}

    def run(i: int) -> None:
        try:
            batch = texts if i % 3 == 0 else [texts[i]]
            for _ in range(5):
                out = embedder.encode(batch)
            results[i] = out[i] if i % 3 == 0 else out[0]
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            failures.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not failures
    for i, vector in results.items():
        np.testing.assert_allclose(vector, expected[i], atol=1e-5)


def test_embedded_config_names_the_waking_classes() -> None:
    conf = embedded_config()
    assert conf["broker_transport"].endswith(":EmbeddedTransport")
    assert conf["result_backend"].endswith(":EmbeddedResults")


class _Counting(EmbeddedResults):
    reads = 0

    def get_task_meta(self, task_id: str, cache: bool = True) -> dict[str, Any]:
        type(self).reads += 1
        meta: dict[str, Any] = super().get_task_meta(task_id, cache=cache)
        return meta


def test_result_wait_wakes_on_store_instead_of_polling() -> None:
    app = Celery("floor", set_as_current=False)
    app.conf.cache_backend = "memory"
    backend = _Counting(app=app)
    started = threading.Event()

    def store() -> None:
        started.wait()
        time.sleep(0.2)  # long enough for a 1 ms poll to read hundreds of times
        backend.store_result("t-floor", {"ok": 1}, states.SUCCESS)

    threading.Thread(target=store).start()
    started.set()
    meta = backend.wait_for("t-floor", timeout=30, interval=0.001)
    assert meta["status"] == states.SUCCESS and meta["result"] == {"ok": 1}
    assert _Counting.reads <= 3  # the first read, the wake on the store, maybe one spurious


def test_result_wait_times_out() -> None:
    from celery.exceptions import TimeoutError as ResultTimeout

    app = Celery("floor-timeout", set_as_current=False)
    app.conf.cache_backend = "memory"
    with pytest.raises(ResultTimeout):
        EmbeddedResults(app=app).wait_for("t-never", timeout=0.05)


def test_consumer_wakes_on_arrival_not_after_its_polling_interval() -> None:
    received: list[Any] = []
    queue = KombuQueue("floor", Exchange("floor"), routing_key="floor")
    # A polling interval far above the drain's timeout: only a wake-up can deliver in time.
    options = {"polling_interval": 3600}
    with Connection(transport=EmbeddedTransport, transport_options=options) as conn:
        channel = conn.channel()
        queue(channel).declare()
        consumer = conn.Consumer(queue, callbacks=[lambda body, msg: received.append(body)])
        consumer.consume()
        started = threading.Event()

        def publish() -> None:
            started.wait()
            time.sleep(0.1)
            with Connection(transport=EmbeddedTransport) as other:
                Producer(other.channel()).publish(
                    {"n": 1}, exchange=queue.exchange, routing_key="floor", declare=[queue]
                )

        threading.Thread(target=publish).start()
        started.set()
        conn.drain_events(timeout=30)
    assert received == [{"n": 1}]


_WORKER_BACKEND = """
import sys
from pathlib import Path
from common.settings import get_settings
from workers import runtime
from workers.celery_app import app
from workers.embedded import EmbeddedWorker
runtime.configure(get_settings().in_data_dir(Path(sys.argv[1])))
worker = EmbeddedWorker()
worker.start()
try:
    print(type(app.backend).__name__, app.conf.result_backend)
finally:
    worker.stop()
"""


def test_a_fresh_process_with_the_embedded_worker_waits_on_the_waking_result_store(
    tmp_path: Path,
) -> None:
    # In a fresh process the app is configured when first read, and its configure hook
    # applied the shared configuration over the embedded one: every `.get()` of a query
    # then polled the plain in-memory store every 5 ms.
    env = {k: v for k, v in os.environ.items() if not k.startswith("ATOMMEM_BROKER__")}
    run = subprocess.run(
        [sys.executable, "-c", _WORKER_BACKEND, str(tmp_path)],
        capture_output=True, text=True, timeout=120, check=True, env=env,
    )  # fmt: skip
    assert run.stdout.split() == ["EmbeddedResults", "workers.embedded:EmbeddedResults"]
