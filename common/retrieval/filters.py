"""A search's filters as a mask over the space's fact rows: by participant (the index's
postings), by session and by when a fact was said (each row's session and time, read from
the records once per index state and kept beside it)."""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np

from common.models.api import SearchFilters
from common.models.memory import Fact
from common.models.session import SessionInput
from common.store.space_index import KindIndex

MISSING = np.iinfo(np.int64).min  # a dead row's time: no range holds it


@dataclass(frozen=True)
class _Columns:
    """Each fact row's session id and the time it was said (seconds), at one index state."""

    state: tuple[int, int]  # (mutations, rows)
    sessions: np.ndarray  # object: str, or None for a dead row
    said: np.ndarray  # int64 seconds


_KEPT: weakref.WeakKeyDictionary[KindIndex[Fact], _Columns] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def _seconds(when: datetime) -> int:
    """A time as seconds of wall-clock time, as memory keeps a session's: a time given with an
    offset is read in that offset (the offset dropped), as `started_at` is."""
    return int(when.replace(tzinfo=UTC).timestamp())


def _columns(facts: KindIndex[Fact]) -> _Columns:
    """The columns of `facts` as it stands now, built on first need after a write."""
    state = (facts.mutations, len(facts.ids))
    with _LOCK:
        kept = _KEPT.get(facts)
    if kept is not None and kept.state == state:
        return kept
    n = state[1]
    sessions = np.empty(n, dtype=object)
    said = np.full(n, MISSING, dtype=np.int64)
    for row in range(n):
        fact = facts.live(row)
        if fact is not None:
            sessions[row] = fact.source.session_id
            said[row] = _seconds(fact.time.session)
    built = _Columns(state, sessions, said)
    if state[0] % 2 == 0 and facts.mutations == state[0]:  # no write overlapped the reads
        with _LOCK:
            _KEPT[facts] = built
    return built


def allowed(facts: KindIndex[Fact], filters: SearchFilters | None) -> np.ndarray | None:
    """The live rows the filters let through, or None when there are no filters."""
    if filters is None or filters.empty:
        return None
    mask = facts.mask(filters.participants)
    if filters.session_ids is None and filters.after is None and filters.before is None:
        return mask
    columns = _columns(facts)
    n = min(mask.size, columns.sessions.size)
    mask = mask[:n].copy()
    if filters.session_ids is not None:
        mask &= np.isin(columns.sessions[:n], list(filters.session_ids))
    if filters.after is not None:
        mask &= columns.said[:n] >= _seconds(filters.after)
    if filters.before is not None:
        mask &= (columns.said[:n] != MISSING) & (columns.said[:n] <= _seconds(filters.before))
    return mask


def pending_allowed(
    sessions: list[SessionInput], filters: SearchFilters | None
) -> list[SessionInput]:
    """The pending sessions the filters let through (by session, start time, participant)."""
    if filters is None or filters.empty:
        return sessions
    kept = []
    for session in sessions:
        started = _seconds(session.local_time)
        if filters.session_ids is not None and session.session_id not in filters.session_ids:
            continue
        if filters.after is not None and started < _seconds(filters.after):
            continue
        if filters.before is not None and started > _seconds(filters.before):
            continue
        if filters.participants is not None and not set(filters.participants) & set(
            session.participants
        ):
            continue
        kept.append(session)
    return kept
