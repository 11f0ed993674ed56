"""LangGraph's long-term memory store over AtomMem (`pip install 'atommem[langgraph]'`).

    from langgraph.graph import StateGraph
    from api.adapters.langgraph import AtomMemStore

    store = AtomMemStore(AtomMem(url, key))
    graph = builder.compile(store=store)  # nodes get it as `store` (or get_store())

A namespace is a space: its labels joined by '.' (`("users", "priya")` is the space
`users.priya`, created on the first put). An item is a session of one turn: `put(ns, key,
{"content": text, "speaker"?: name})` submits it under the session id `key` and waits until
memory has it, so a later `search` in the same graph finds it; putting other content under a
key replaces it (its session is erased, then submitted again), `delete` erases it. `search`
with a `query` runs AtomMem's recall and returns the items whose facts answer it, best first,
each with the facts found (`value["facts"]`) and `score`, the best fact's relevance in [0, 1];
without a query it lists the namespace's items in session order. Values keep text, so a
value is `content` and optionally `speaker`; anything else is refused rather than dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from api.client import AtomMem, ConflictError, NotFoundError
from common.models.responses import StoredSession

FIELDS = {"content", "speaker"}
SEARCH_K = 50  # facts asked of recall per search: enough to fill a few pages of items


def space_of(namespace: tuple[str, ...]) -> str:
    return ".".join(namespace)


def namespace_of(space: str) -> tuple[str, ...]:
    return tuple(space.split("."))


def _matches(namespace: tuple[str, ...], condition: MatchCondition) -> bool:
    path = tuple(condition.path)
    if len(path) > len(namespace):
        return False
    part = namespace[: len(path)] if condition.match_type == "prefix" else namespace[-len(path) :]
    return all(p == "*" or p == n for p, n in zip(path, part, strict=True))


class AtomMemStore(BaseStore):
    """A LangGraph `BaseStore` whose namespaces are AtomMem spaces (module docstring)."""

    def __init__(self, mem: AtomMem, speaker: str = "User", wait_s: float = 300.0) -> None:
        self.mem = mem
        self.speaker = speaker
        self.wait_s = wait_s
        self._spaces: set[str] = set()

    # BaseStore's two primitives: every get, put, search and listing comes through them.
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return [self._run(op) for op in ops]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await asyncio.to_thread(self.batch, list(ops))

    def _run(self, op: Op) -> Result:
        if isinstance(op, GetOp):
            return self._get(op.namespace, op.key)
        if isinstance(op, PutOp):
            if op.value is None:
                self._delete(op.namespace, op.key)
            else:
                self._put(op.namespace, op.key, dict(op.value))
            return None
        if isinstance(op, SearchOp):
            return self._search(op)
        if isinstance(op, ListNamespacesOp):
            return self._namespaces(op)
        raise TypeError(f"not a store operation: {op!r}")

    def _get(self, namespace: tuple[str, ...], key: str) -> Item | None:
        try:
            stored = self.mem.session(space_of(namespace), key)
        except NotFoundError:
            return None
        return _item(namespace, stored)

    def _put(self, namespace: tuple[str, ...], key: str, value: dict[str, Any]) -> None:
        extra = set(value) - FIELDS
        content = value.get("content")
        if extra or not isinstance(content, str) or not content.strip():
            raise ValueError(
                "an AtomMem item keeps text: its value is {'content': str, 'speaker'?: str}"
                + (f"; not {sorted(extra)}" if extra else "")
            )
        speaker = str(value.get("speaker") or self.speaker)
        space = self._space(namespace)
        current = self._get(namespace, key)
        if current is not None:
            if current.value == {"content": content, "speaker": speaker}:
                return  # the same item: nothing to do
            self.mem.delete(space, session_id=key)
        session = {
            "session_id": key,
            "started_at": datetime.now(UTC).isoformat(),
            "participants": [speaker],
            "turns": [{"speaker": speaker, "text": content}],
        }
        job = self.mem.add(space, session)
        (done,) = self.mem.wait([job.job_id], timeout=self.wait_s)
        if done.state != "done":
            raise RuntimeError(f"item {key!r} was not stored: {done.reason}")

    def _delete(self, namespace: tuple[str, ...], key: str) -> None:
        with contextlib.suppress(NotFoundError):  # not there: deleted already
            self.mem.delete(space_of(namespace), session_id=key)

    def _space(self, namespace: tuple[str, ...]) -> str:
        space = space_of(namespace)
        if space not in self._spaces:
            with contextlib.suppress(ConflictError):  # exists already
                self.mem.create_space(space)
            self._spaces.add(space)
        return space

    def _search(self, op: SearchOp) -> list[SearchItem]:
        found: list[SearchItem] = []
        for space in self._spaces_under(op.namespace_prefix):
            namespace = namespace_of(space)
            if op.query:
                found += self._recall(namespace, op.query)
            else:
                found += [
                    _search_item(namespace, self.mem.session(space, s.session_id), None, [])
                    for s in self.mem.sessions(space)
                ]
        if op.filter:
            found = [i for i in found if all(i.value.get(k) == v for k, v in op.filter.items())]
        if op.query:
            found.sort(key=lambda i: -(i.score or 0.0))
        return found[op.offset : op.offset + op.limit]

    def _recall(self, namespace: tuple[str, ...], query: str) -> list[SearchItem]:
        """The items whose facts answer `query`, each once, at its best fact's relevance."""
        space = space_of(namespace)
        facts: dict[str, list[str]] = {}
        score: dict[str, float] = {}
        for hit in self.mem.search(space, query, k=SEARCH_K).hits:
            facts.setdefault(hit.session_id, []).append(hit.text)
            score[hit.session_id] = max(score.get(hit.session_id, 0.0), hit.relevance)
        items = []
        for key, texts in facts.items():
            try:
                stored = self.mem.session(space, key)
            except NotFoundError:
                continue  # erased since the search
            items.append(_search_item(namespace, stored, score[key], texts))
        return items

    def _spaces_under(self, prefix: Sequence[str]) -> list[str]:
        prefix = tuple(prefix)
        return [
            s.name for s in self.mem.list_spaces() if namespace_of(s.name)[: len(prefix)] == prefix
        ]

    def _namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        found = set()
        for space in self.mem.list_spaces():
            namespace = namespace_of(space.name)
            if all(_matches(namespace, c) for c in op.match_conditions or ()):
                found.add(namespace[: op.max_depth] if op.max_depth else namespace)
        return sorted(found)[op.offset : op.offset + op.limit]


def _value(stored: StoredSession) -> dict[str, Any]:
    (turn,) = stored.turns[:1]
    return {"content": turn.text, "speaker": turn.speaker}


def _when(stored: StoredSession) -> datetime:
    return stored.started_at.replace(tzinfo=UTC)


def _item(namespace: tuple[str, ...], stored: StoredSession) -> Item:
    when = _when(stored)
    return Item(
        value=_value(stored), key=stored.session_id, namespace=namespace,
        created_at=when, updated_at=when,
    )  # fmt: skip


def _search_item(
    namespace: tuple[str, ...], stored: StoredSession, score: float | None, facts: list[str]
) -> SearchItem:
    when = _when(stored)
    value = _value(stored) | ({"facts": facts} if facts else {})
    return SearchItem(
        namespace=namespace, key=stored.session_id, value=value, created_at=when,
        updated_at=when, score=score,
    )  # fmt: skip
