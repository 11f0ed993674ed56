"""Recall over the sessions a space has accepted but not yet committed: their raw turns,
ranked by S_h against the question, come back beside the facts (docs/recall.md, "Pending
sessions").

`rank` is the rule, a pure function of the sessions, the question's vector and its words
(turn vectors come through a callable, cached per process by `TurnVectors`);
`pending_sessions` reads which sessions are pending and their turns.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from common.models import ids
from common.models.jobs import AcceptPayload
from common.models.session import SessionInput, SessionRecord, Turn
from common.retrieval.caches import PerEncoder
from common.settings import SimilaritySettings
from common.similarity import TextQuery, hybrid_many
from common.store.base import Kind, Store
from common.store.coordination.jobs import JobStore
from common.store.coordination.sequence import SpaceSequence
from common.text.lexical import Bm25, document_terms, query_terms

# A stored record in these states has written no fact yet (`committing` is a stage whose plan
# is recorded but not applied); from `committed` on, its facts are memory.
PENDING_STATUSES = frozenset({"accepted", "committing"})
CACHED_SESSIONS = 256

Vectors = Callable[[SessionInput, Sequence[int]], np.ndarray]


@dataclass(frozen=True)
class PendingHit:
    session: SessionInput
    turn: Turn
    score: float

    @property
    def evidence_id(self) -> str:
        """How the turn is named among an answer's evidence."""
        return f"pending:{self.session.session_id}:{self.turn.id}"


@dataclass(frozen=True)
class PendingResult:
    hits: list[PendingHit]
    searched: int  # turns scored
    cut: int  # turns left unsearched by `max_turns`


def turn_text(turn: Turn) -> str:
    """What a pending turn is embedded and matched as."""
    return f"{turn.speaker}: {turn.text}"


def pending_sessions(
    store: Store, jobs: JobStore, sequence: SpaceSequence, tenant: str, space: str
) -> list[SessionInput]:
    """The space's sessions in its sequence that have no facts in memory yet and whose job
    is still on its way (not failed, not erased), in session order: their stored record's
    turns, or the job's payload before accept stored one."""
    waiting = sequence.pending(tenant, space)
    if not waiting:
        return []
    points = store.retrieve(
        Kind.SESSIONS, tenant, space, [ids.session_point_id(tenant, space, s) for s in waiting]
    )
    stored = {
        r.session.session_id: r for r in (SessionRecord.model_validate(p.payload) for p in points)
    }
    out: list[SessionInput] = []
    for session_id in waiting:
        job_id = ids.job_id(tenant, space, session_id)
        raw = jobs.job_payload(tenant, job_id)
        job = jobs.get_job(tenant, job_id)
        if raw is None or job is None or job.state == "failed":
            # erased (even if an interrupted erasure left its record), failed or expired:
            # it is not on its way into memory
            continue
        record = stored.get(session_id)
        if record is not None:
            if record.status in PENDING_STATUSES and record.job_id == job_id:
                out.append(record.session)
            continue
        try:
            session = AcceptPayload.model_validate_json(raw).session
        except ValueError:
            continue
        if session.session_id == session_id:
            out.append(session)
    return out


def rank(
    sessions: Sequence[SessionInput],
    vector: np.ndarray,
    query: TextQuery,
    vectors: Vectors,
    weights: SimilaritySettings,
    top_k: int,
    min_score: float,
    max_turns: int,
    sources: frozenset[tuple[str, str]] = frozenset(),
) -> PendingResult:
    """The best pending turns for a question.

    Turns with text are searched newest session first (`sessions` come in session order),
    at most `max_turns` of them (a session that crosses the bound keeps its last turns);
    a turn in `sources` ((session_id, turn id) of the facts returned) is left out, so
    nothing counts twice. Each turn scores S_h = alpha*cos(turn, question) + beta*L, L the
    BM25 of the question's terms over the searched turns scaled to [0, 1]; the top `top_k`
    with S_h >= `min_score` come back, best first (ties: newer session, earlier turn)."""
    chosen: list[tuple[SessionInput, list[int]]] = []
    budget, cut = max_turns, 0
    for session in reversed(sessions):
        rows = [
            i
            for i, t in enumerate(session.turns)
            if t.text.strip() and (session.session_id, str(t.id)) not in sources
        ]
        take = rows[len(rows) - budget :] if len(rows) > budget else rows
        cut += len(rows) - len(take)
        budget -= len(take)
        if take:
            chosen.append((session, take))
    turns = [(s, s.turns[i]) for s, rows in chosen for i in rows]
    if not turns or top_k <= 0:
        return PendingResult([], len(turns), cut)
    matrix = np.vstack([vectors(s, rows) for s, rows in chosen])
    bm25 = Bm25()
    for row, (_, turn) in enumerate(turns):
        bm25.set(row, document_terms(turn_text(turn)))
    lexical = bm25.normalised(
        query_terms(query.text, query.keywords), len(turns), weights.bm25_k1, weights.bm25_b
    )
    scores = hybrid_many(matrix @ vector, lexical, weights)
    order = sorted(range(len(turns)), key=lambda r: (-float(scores[r]), r))
    hits = [
        PendingHit(turns[r][0], turns[r][1], float(scores[r]))
        for r in order
        if float(scores[r]) >= min_score
    ]
    return PendingResult(hits[:top_k], len(turns), cut)


class TurnVectors:
    """Turn vectors of pending sessions, kept per process for the last `capacity` sessions
    (keyed by content hash: a session's turns never change under one hash), so a question
    asked again, or the next question, embeds nothing new. Only the turns asked for are
    embedded."""

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._lock = threading.Lock()
        self._kept: OrderedDict[str, dict[int, np.ndarray]] = OrderedDict()

    def get(
        self, session: SessionInput, rows: Sequence[int], encode: Callable[[list[str]], np.ndarray]
    ) -> np.ndarray:
        """The vectors of these turns of the session, embedding only those not kept."""
        key = session.content_hash()
        with self._lock:
            known = self._kept.get(key, {})
            missing = [i for i in rows if i not in known]
        if missing:
            fresh = encode([turn_text(session.turns[i]) for i in missing])
            with self._lock:
                known = {**self._kept.get(key, {}), **dict(zip(missing, fresh, strict=True))}
        with self._lock:
            self._kept[key] = known
            self._kept.move_to_end(key)
            while len(self._kept) > self._capacity:
                self._kept.popitem(last=False)
        return np.stack([known[i] for i in rows])


# turn_vectors(encoder): the process's cache of pending turn vectors for that encoder
turn_vectors = PerEncoder(lambda: TurnVectors(CACHED_SESSIONS))
