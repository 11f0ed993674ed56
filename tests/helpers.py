"""Test doubles and builders shared by the unit tests."""

from __future__ import annotations

import os
import time
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest
import redis

from common.llm.contracts import FactView, VerifyDecision
from common.llm.rules import RulesBackend
from common.memory.context import MemoryContext
from common.models import ids
from common.models.drafts import DraftFact
from common.models.jobs import Job
from common.models.memory import Fact, FactSource, FactTime, TimeRange
from common.models.session import SessionInput, SessionRecord, Turn
from common.settings import EmbeddingSettings, Settings, StoreSettings
from common.store import records
from common.store.backends import open_store
from common.store.base import Store
from common.store.coordination import Coordination

DIM = 4
OPEN_STORES: list[Store] = []


def unit(*values: float) -> np.ndarray:
    v = np.asarray(values, dtype=np.float32)
    return v / np.linalg.norm(v)


class TableEncoder:
    """Vectors looked up by text; unknown texts get a fixed vector."""

    dimension = DIM

    def __init__(self, table: dict[str, np.ndarray] | None = None) -> None:
        self.table = table or {}
        self.calls = 0

    def encode(self, texts: list[str]) -> np.ndarray:
        self.calls += 1
        rows = [self.table.get(t, unit(0, 0, 0, 1)) for t in texts]
        return np.stack(rows) if rows else np.zeros((0, DIM), dtype=np.float32)


class ScriptedBackend(RulesBackend):
    """The rules backend with event links and verification decisions set by the test."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings.rules, settings.memory)
        self.links: dict[str, list[str]] = {}
        self.verdicts: dict[str, VerifyDecision] = {}
        self.seen_candidates: dict[str, list[str]] = {}

    def link_event(self, new: FactView, similar: list[FactView]) -> list[str]:
        self.seen_candidates[new.text] = [s.id for s in similar]
        wanted = self.links.get(new.text, [])
        by_text = {s.text: s.id for s in similar}
        return [by_text[t] for t in wanted if t in by_text]

    def verify(self, new: FactView, candidates: list[FactView]) -> VerifyDecision:
        return self.verdicts.get(new.text, VerifyDecision())


def make_ctx(
    tmp_path: Path, encoder: TableEncoder | None = None, scripted: bool = True
) -> MemoryContext:
    settings = Settings(
        store=StoreSettings(qdrant_path=tmp_path / "qdrant"),
        embedding=EmbeddingSettings(dimension=DIM),
    )
    backend = (
        ScriptedBackend(settings) if scripted else RulesBackend(settings.rules, settings.memory)
    )
    ctx = MemoryContext(
        settings=settings,
        store=open_store(settings.store, DIM),
        embedder=encoder or TableEncoder(),
        backend=backend,
    )
    OPEN_STORES.append(ctx.store)
    records.create_space(ctx.store, "t", "s")
    return ctx


def stored_fact(
    fid: str,
    text: str,
    keywords: list[str] | None = None,
    participants: tuple[str, ...] = ("Priya",),
    turn: str = "s1:1",
    space: str = "s",
) -> Fact:
    """A fact as memory holds it, from one turn of one session on 8 May 2023."""
    return Fact(
        id=fid,
        tenant="t",
        space=space,
        text=text,
        participants=list(participants),
        keywords=keywords or [],
        time=FactTime(session=datetime(2023, 5, 8, 12, 0)),
        source=FactSource(session_id="s1", session_seq=0, turn_ids=[turn], positions=[1]),
    )


def session_record(session_id: str, seq: int, when: datetime, people: list[str]) -> SessionRecord:
    session = SessionInput(
        session_id=session_id,
        started_at=when,
        participants=people,
        turns=[Turn(id=f"{session_id}:0", speaker=people[0], text="placeholder text")],
    )
    return SessionRecord(
        tenant="t",
        space="s",
        session=session,
        seq=seq,
        content_hash=session_id,
        status="committing",
    )


def queued_head(ctx: MemoryContext, record: SessionRecord, journal: Path) -> Coordination:
    """`record` accepted (job j1, extracting) and at the head of its space's sequence, on a
    SQLite coordination journal at `journal`: what a drain step finds before it commits."""
    records.put_session(ctx.store, record.model_copy(update={"status": "accepted", "job_id": "j1"}))
    coord = Coordination.sqlite(journal)
    now = time.time()
    job = Job(
        job_id="j1", tenant="t", space="s", session_id=record.session.session_id,
        state="extracting", created_at=now, updated_at=now,
    )  # fmt: skip
    coord.jobs.put_job(job, "{}")
    coord.sequence.register("t", "s", record.session.session_id, 0)
    return coord


def draft(
    record: SessionRecord,
    text: str,
    vector: np.ndarray,
    keywords: list[str],
    people: list[str],
    index: int = 0,
    event_time: TimeRange | None = None,
    profile: bool = False,
) -> DraftFact:
    turn = f"{record.session.session_id}:{index}"
    return DraftFact(
        id=ids.fact_id("t", "s", record.session.session_id, turn, 0),
        text=text,
        turn_ids=[turn],
        positions=[index],
        participants=people,
        keywords=keywords,
        event_time=event_time,
        profile_worthy=profile,
        vector=vector.astype(float).tolist(),
    )


def redis_or_skip(url: str, decode_responses: bool = False) -> redis.Redis:
    """A client of the Redis at `url`; the test skips where none answers, and fails under
    `CI=true`, where every tier must run."""
    client = redis.Redis.from_url(url, decode_responses=decode_responses)
    try:
        client.ping()
    except redis.ConnectionError:
        client.close()
        if os.environ.get("CI") == "true":
            pytest.fail("Redis is not running on 127.0.0.1:6379 (required in CI)")
        pytest.skip("Redis is not running on 127.0.0.1:6379")
    return client


def redis_text(client: redis.Redis) -> str:
    """Every key of the client's database with its value, as one text (a line a key): what
    a test searches for text that must not be left anywhere."""
    out = []
    for key in client.scan_iter(count=500):
        kind = client.type(key)
        value: object = kind
        if kind == "string":
            value = client.get(key)
        elif kind == "hash":
            value = client.hgetall(key)
        elif kind == "list":
            value = client.lrange(key, 0, -1)
        elif kind == "set":
            value = sorted(client.smembers(key))
        elif kind == "zset":
            value = client.zrange(key, 0, -1)
        out.append(f"{key} {value}")
    return "\n".join(out)
