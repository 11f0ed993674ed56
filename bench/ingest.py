"""Submit a benchmark's sessions as production does and wait for every job; and the floor an
ingest rate is read against, the embedding model alone over the same texts."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from tqdm import tqdm

from common.context import MemoryContext
from common.errors import InvalidInput
from common.memory.changes import CommitStats
from common.memory.extract import chunks, extracted_facts
from common.models.memory import Event
from common.models.session import SessionInput
from common.store.base import Kind


@dataclass(frozen=True)
class EmbeddingFloor:
    """The embedding model alone over an ingest's fact texts, batched as the ingest batched
    them, timed in the same run."""

    texts: int
    batches: int
    seconds: float

    @property
    def facts_per_s(self) -> float:
        return self.texts / self.seconds if self.seconds > 0 else float("inf")

    def ratio(self, facts_in: int, ingest_seconds: float) -> float:
        """The ingest's rate over the same texts (facts in, not facts stored) against this
        floor: 1.0 would be an ingest that costs nothing beyond its embeddings."""
        return (facts_in / ingest_seconds) / self.facts_per_s

    def as_fields(self, facts_in: int, ingest_seconds: float) -> dict[str, Any]:
        return {
            "embedding_only_texts": self.texts,
            "embedding_only_batches": self.batches,
            "embedding_only_seconds": round(self.seconds, 2),
            "embedding_only_facts_per_s": round(self.facts_per_s, 2),
            "facts_in_per_s": round(facts_in / ingest_seconds, 2),
            "ratio_to_embedding_only": round(self.ratio(facts_in, ingest_seconds), 3),
        }


def ingest_jobs(
    client: Any, tenant: str, items: Sequence[tuple[str, SessionInput]], desc: str, quiet: bool
) -> tuple[float, CommitStats]:
    """Submit sessions as production does, wait for every job with a progress bar, and
    return the seconds it took and the jobs' summed counts (model calls and tokens
    included); any failed job stops the benchmark with its reason."""
    started = time.perf_counter()
    jobs = client.submit_many(tenant, items)
    bar = tqdm(total=len(jobs), desc=desc, unit="session", disable=quiet)
    done = client.wait(
        tenant, [j.job_id for j in jobs], on_progress=lambda n: bar.update(n - bar.n)
    )
    bar.close()
    seconds = time.perf_counter() - started
    failed = [j for j in done if j.state != "done"]
    if failed:
        raise InvalidInput(
            f"{len(failed)} ingest jobs failed, first: {failed[0].job_id}: {failed[0].reason}"
        )
    total = CommitStats()
    for job in done:
        total.add(CommitStats.from_counts(job.counts))
    return seconds, total


def embedded_batches(
    ctx: MemoryContext, items: Sequence[tuple[str, SessionInput]]
) -> list[list[str]] | None:
    """The fact texts the ingest embeds, in its batches: one `encode` per extract chunk, as
    `draft_session` calls it. None when a session is dialogue (its facts come from the
    extractor, so there is nothing to embed ahead of it without running the model)."""
    if not all(session.pre_extracted for _, session in items):
        return None
    size = ctx.settings.pipeline.extract_batch_turns
    context_k = ctx.settings.memory.context_window_k
    batches = []
    for _, session in items:
        for chunk, skip in chunks(session, size, context_k):
            texts = [fact.text for fact in extracted_facts(ctx, chunk, skip)]
            if texts:
                batches.append(texts)
    return batches


def embedding_only(
    encode: Callable[[list[str]], Any], batches: Sequence[list[str]]
) -> EmbeddingFloor:
    """Time the embedding model alone over `batches`, one call each: the floor an ingest
    rate is read against. Call it with the model already loaded and warm."""
    started = time.perf_counter()
    for texts in batches:
        encode(texts)
    seconds = time.perf_counter() - started
    return EmbeddingFloor(sum(len(b) for b in batches), len(batches), seconds)


def event_sizes(store: Any, tenant: str, spaces: Sequence[str]) -> dict[str, Any]:
    """How many facts the spaces' events hold, and how many days they span: the size
    distribution an event bound (`memory.event_max_facts`, `event_max_span_days`) shapes."""
    sizes: list[int] = []
    spans: list[int] = []
    for space in spaces:
        for point in store.scroll(Kind.EVENTS, tenant, space):
            event = Event.model_validate(point.payload)
            sizes.append(len(event.fact_ids))
            if event.time_span is not None:
                spans.append((event.time_span.end - event.time_span.start).days)
    if not sizes:
        return {"events": 0}
    return {
        "events": len(sizes),
        "facts_p50": float(np.percentile(sizes, 50)),
        "facts_p90": float(np.percentile(sizes, 90)),
        "facts_max": max(sizes),
        "span_days_p50": float(np.percentile(spans, 50)) if spans else None,
        "span_days_max": max(spans) if spans else None,
    }
