"""Search and ask against a space's memory and its sessions not yet committed (read-only, so
safe to run twice); a reply is stored only while its caller waits (workers.replies)."""

from __future__ import annotations

from typing import Any

from celery import Task

from common.errors import AtomMemError, failure
from common.models.jobs import QueryPayload
from common.models.session import SessionInput
from common.queues import Queue, TaskName
from common.retrieval.pending import pending_sessions
from common.retrieval.search import ask as ask_memory
from common.retrieval.search import ask_response, search_response
from common.retrieval.search import search as search_memory
from workers import runtime
from workers.celery_app import observe_wait
from workers.replies import ReplyTask
from workers.tasks.policy import task


@task(TaskName.SEARCH, reply=True, base=ReplyTask)
def search(self: Task, payload: dict[str, Any]) -> dict[str, Any]:
    """Ranked facts for a question; errors come back as {"error": message}."""
    p = QueryPayload.model_validate(payload)
    observe_wait(Queue.QUERY, p.enqueued_at)
    try:
        result = search_memory(
            runtime.context(),
            p.tenant,
            p.space,
            p.question,
            k=p.k,
            mode=p.mode,
            explain=p.explain,
            pending=_pending(p),
        )
    except AtomMemError as exc:
        return failure(exc)
    return search_response(result).model_dump(mode="json")


@task(TaskName.ASK, reply=True, base=ReplyTask)
def ask(self: Task, payload: dict[str, Any]) -> dict[str, Any]:
    """An answer with its evidence; errors come back as {"error": message}."""
    p = QueryPayload.model_validate(payload)
    observe_wait(Queue.QUERY, p.enqueued_at)
    try:
        result = ask_memory(
            runtime.context(),
            p.tenant,
            p.space,
            p.question,
            k=p.k,
            mode=p.mode,
            explain=p.explain,
            pending=_pending(p),
        )
    except AtomMemError as exc:
        return failure(exc)
    return ask_response(result).model_dump(mode="json")


def _pending(p: QueryPayload) -> list[SessionInput]:
    """The space's sessions accepted but not yet committed: reads see them too."""
    coord = runtime.coordination()
    return pending_sessions(runtime.context().store, coord.jobs, coord.sequence, p.tenant, p.space)
