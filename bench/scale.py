"""`atommem bench scale`: ingest throughput, query latency and cold open on synthetic spaces of
growing size, through the same task graph and query worker as production.

Each size gets its own space, filled with generated sessions of pre-extracted facts (seeded, so
every run builds the same spaces), then asked generated questions in `full` mode. The facts
combine people, actions, objects, places, companions and dates at random, so near-duplicates
are rare and verification, events and profiles do their usual work.

The ingest rate is read against the embedding model alone over the first `floor_facts` of the
same texts, in the ingest's batches, in the same process. With the embedded store, the store
is then closed (saving the large spaces' indexes, as a worker that stops does) and a fresh
process, `python -m bench.scale SPACE_DIR TENANT SPACE QUESTION`, opens it and answers one
`full` query, timing each step of its start separately.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from tqdm import tqdm

from bench.ingest import embedded_batches, embedding_only, event_sizes, ingest_jobs
from bench.metrics import percentiles
from common.context import MemoryContext
from common.errors import InvalidInput
from common.models.session import SessionInput, Turn
from common.store import records
from common.store.base import Kind

PEOPLE = ("Ava", "Noah")
ACTIONS = (
    "visited", "photographed", "painted", "repaired", "sold", "bought", "cleaned", "designed",
    "cooked for", "wrote about", "sketched", "restored", "rented", "organised", "measured",
    "recorded", "filmed", "mapped", "catalogued", "decorated",
)  # fmt: skip
OBJECTS = (
    "an old lighthouse", "a blue canoe", "a vintage radio", "a rooftop garden", "a jazz club",
    "a pottery studio", "a mountain cabin", "a train museum", "a street mural", "a bakery",
    "a chess tournament", "a fishing boat", "a community library", "a bike workshop",
    "a tea house", "a science fair", "a dog shelter", "a flower market", "a vinyl shop",
    "a climbing gym", "a wooden bridge", "a night market", "a greenhouse", "a bell tower",
    "a puppet theatre",
)  # fmt: skip
PLACES = (
    "Lisbon", "Denver", "Kyoto", "Oslo", "Austin", "Porto", "Quebec", "Seville", "Tallinn",
    "Bergen", "Cork", "Dresden", "Hobart", "Leeds", "Lyon", "Malmo", "Nara", "Perth", "Riga",
    "Split", "Tucson", "Utrecht", "Vigo", "Zurich", "Bristol", "Ghent", "Krakow", "Bilbao",
    "Halifax", "Boise",
)  # fmt: skip
COMPANIONS = (
    "a cousin", "two neighbours", "an old classmate", "a colleague", "a brother", "a sister",
    "a new friend", "a mentor", "a roommate", "a teammate", "an uncle", "a grandmother",
)  # fmt: skip
FEELINGS = (
    "felt proud", "was exhausted", "laughed a lot", "felt calm", "was surprised",
    "felt inspired", "was nervous", "felt grateful", "was delighted", "felt nostalgic",
)  # fmt: skip

FACTS_PER_TURN = 3
TURNS_PER_SESSION = 10
# Texts per size the embedding-only floor is timed over: the synthetic facts are all of one
# length, so a sample gives the rate, and all 100,000 would add minutes to the run.
FLOOR_FACTS = 5000

# A cold open's seconds per step (and what it found: a saved index, facts, hits), as the
# results file records them.
Timings = dict[str, float | int | bool]


def synthetic_sessions(facts: int, seed: int) -> list[SessionInput]:
    """Sessions of pre-extracted facts, `facts` in all, two speakers, a few days apart."""
    if facts < FACTS_PER_TURN:
        raise InvalidInput(f"a synthetic space needs at least {FACTS_PER_TURN} facts")
    rng = random.Random(seed)
    start = datetime(2023, 1, 2, 10, 0)
    sessions = []
    remaining = facts
    n = 0
    while remaining > 0:
        when = start + timedelta(days=3 * n, hours=rng.randint(0, 8))
        turns = []
        for t in range(TURNS_PER_SESSION):
            if remaining <= 0:
                break
            speaker = PEOPLE[t % 2]
            texts = []
            for _ in range(min(FACTS_PER_TURN, remaining)):
                day = when - timedelta(days=rng.randint(0, 20))
                texts.append(
                    f"{speaker} {rng.choice(ACTIONS)} {rng.choice(OBJECTS)} in "
                    f"{rng.choice(PLACES)} with {rng.choice(COMPANIONS)} on "
                    f"{day:%d %B %Y} and {rng.choice(FEELINGS)}."
                )
            remaining -= len(texts)
            turns.append(
                Turn(
                    id=f"S{n + 1}:{t + 1}",
                    speaker=speaker,
                    text=" ".join(texts),
                    position=t,
                    facts=texts,
                )
            )
        sessions.append(
            SessionInput(
                session_id=f"s{n + 1}",
                started_at=when,
                participants=list(PEOPLE),
                turns=turns,
                seq=n,
            )
        )
        n += 1
    return sessions


def synthetic_questions(count: int, seed: int) -> list[str]:
    rng = random.Random(seed + 1)
    forms = (
        "What did {p} do in {place}?",
        "Who went with {p} to {obj}?",
        "When did {p} visit {obj} in {place}?",
        "How did {p} feel about {obj}?",
        "Where has {p} been with {comp}?",
    )
    return [
        rng.choice(forms).format(
            p=rng.choice(PEOPLE),
            place=rng.choice(PLACES),
            obj=rng.choice(OBJECTS),
            comp=rng.choice(COMPANIONS),
        )
        for _ in range(count)
    ]


def run_size(
    client: Any,
    ctx: MemoryContext,
    tenant: str,
    size: int,
    queries: int,
    seed: int,
    quiet: bool,
    floor_facts: int = FLOOR_FACTS,
) -> dict[str, Any]:
    """Ingest one synthetic space of `size` facts, time the embedding model alone over (the
    first `floor_facts` of) the same texts, then time `queries` questions against the space."""
    store = ctx.store
    space = f"scale-{size}"
    if records.get_space(store, tenant, space) is not None:
        raise InvalidInput(f"space {space!r} already exists: use a fresh --data-dir")
    records.create_space(store, tenant, space)
    sessions = synthetic_sessions(size, seed)
    items = [(space, s) for s in sessions]
    seconds, spent = ingest_jobs(client, tenant, items, f"ingest {size}", quiet)
    floor = embedding_only(
        ctx.embedder.encode, _leading(embedded_batches(ctx, items) or [], floor_facts)
    )
    stored = store.count(Kind.FACTS, tenant, space)
    questions = synthetic_questions(queries, seed)
    began_queries = time.perf_counter()
    client.search(tenant, space, questions[0])  # load the space index once
    stages: dict[str, list[float]] = {}
    for question in tqdm(questions, desc=f"query {size}", unit="q", disable=quiet):
        began = time.perf_counter()
        response = client.search(tenant, space, question, mode="full")
        stages.setdefault("through_query_worker", []).append((time.perf_counter() - began) * 1000)
        for name, ms in response.timings_ms.items():
            stages.setdefault(name, []).append(ms)
    return {
        "size": size,
        "space": space,
        "sessions": len(sessions),
        "facts_in": spent.facts_in,
        "facts_stored": stored,
        "events": store.count(Kind.EVENTS, tenant, space),
        "event_sizes": event_sizes(store, tenant, [space]),
        "profiles": store.count(Kind.PROFILES, tenant, space),
        "ingest_seconds": round(seconds, 2),
        "facts_per_s": round(size / seconds, 2),
        **floor.as_fields(spent.facts_in, seconds),
        "queries": queries,
        "latency_ms": {name: percentiles(values) for name, values in stages.items()},
        "phase_seconds": {
            "ingest": round(seconds, 2),
            "embedding_only": round(floor.seconds, 2),
            "queries": round(time.perf_counter() - began_queries, 2),
        },
    }


def _leading(batches: list[list[str]], limit: int) -> list[list[str]]:
    """The first batches holding at least `limit` texts (all of them when fewer)."""
    out: list[list[str]] = []
    total = 0
    for batch in batches:
        if total >= limit:
            break
        out.append(batch)
        total += len(batch)
    return out


def cold_open(store_path: Path, tenant: str, space: str, question: str) -> Timings:
    """Open the closed embedded store in a fresh process and answer one `full` query there;
    the child's own timings, with the whole process's wall time beside them."""
    command = [sys.executable, "-m", "bench.scale", str(store_path), tenant, space, question]
    spawned = time.time()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    wall = time.time() - spawned
    if done.returncode != 0:
        raise InvalidInput(f"the cold-open process failed:\n{done.stderr[-2000:]}")
    timings: Timings = json.loads(done.stdout.strip().splitlines()[-1])
    timings["startup_s"] = round(timings.pop("entered_at") - spawned, 3)
    timings["process_s"] = round(wall, 3)
    return timings


def _cold_open_child(store_path: str, tenant: str, space: str, question: str) -> Timings:
    """In the fresh process: import, load the model, open the store and the space's index,
    answer one query; seconds for each step. `cold_open_s` is the store and the index."""
    entered_at = time.time()  # the parent subtracts its spawn time: interpreter + module imports
    started = time.perf_counter()
    from common.retrieval.search import search
    from common.settings import get_settings
    from common.store.space_index import SpaceIndex
    from workers.wiring import build_context

    imported = time.perf_counter()
    base = get_settings()
    settings = base.model_copy(
        update={"store": base.store.model_copy(update={"qdrant_path": Path(store_path)})}
    )
    ctx = build_context(settings)
    ctx.embedder.encode([])  # the model loaded: start-up, not the store's
    loaded = time.perf_counter()
    snapshots = ctx.store.snapshots
    saved = False  # whether the index came from the saved one (a file of other code is not)
    if snapshots is not None:
        load = snapshots.load

        def load_and_note(tenant: str, space: str, counts: dict[str, int]) -> Any | None:
            nonlocal saved
            index = load(tenant, space, counts)  # used as MemoryContext._open_index uses it
            saved = isinstance(index, SpaceIndex) and index.dimension == ctx.embedder.dimension
            return index

        snapshots.load = load_and_note  # type: ignore[method-assign]
    records.require_space(ctx.store, tenant, space)  # the store opens on its first call
    opened = time.perf_counter()
    index = ctx.index(tenant, space)
    ready = time.perf_counter()
    result = search(ctx, tenant, space, question, mode="full")
    answered = time.perf_counter()
    ctx.close()
    return {
        "entered_at": entered_at,
        "import_s": round(imported - started, 3),
        "model_load_s": round(loaded - imported, 3),
        "store_open_s": round(opened - loaded, 3),
        "index_s": round(ready - opened, 3),
        "cold_open_s": round(ready - loaded, 3),
        "first_query_s": round(answered - ready, 3),
        "saved_index": saved,
        "index_facts": len(index.facts),
        "first_query_hits": len(result.hits),
    }


def growth(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Each size against the smallest: query latency (p50, p95) and ingest rate, as ratios."""
    base = rows[0]
    out = {}
    for row in rows[1:]:
        entry: dict[str, float] = {
            "facts_per_s": round(row["facts_per_s"] / base["facts_per_s"], 2),
        }
        for stage in ("through_query_worker", "total", "graph", "primary", "lexical"):
            if stage in row["latency_ms"] and stage in base["latency_ms"]:
                for q in ("p50", "p95"):
                    denominator = base["latency_ms"][stage][q] or 1e-9
                    entry[f"{stage}_{q}"] = round(row["latency_ms"][stage][q] / denominator, 2)
        out[f"{row['size']}_vs_{base['size']}"] = entry
    return out


if __name__ == "__main__":
    print(json.dumps(_cold_open_child(*sys.argv[1:5])))
