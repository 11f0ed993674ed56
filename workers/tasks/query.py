"""Search and ask against a space's memory and its sessions not yet committed (read-only, so
safe to run twice); a reply is stored only while its caller waits (workers.replies)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from celery import Task
from pydantic import BaseModel

from common.errors import AtomMemError, failure
from common.llm import budget
from common.models.jobs import QueryPayload
from common.priority import questions
from common.queues import Queue, TaskName
from common.retrieval.pending import pending_sessions
from common.retrieval.search import ask as ask_memory
from common.retrieval.search import ask_response, search_response
from common.retrieval.search import search as search_memory
from workers import runtime
from workers.celery_app import observe_wait
from workers.replies import ReplyTask
from workers.tasks.policy import task


@task(TaskName.SEARCH, base=ReplyTask)
def search(self: Task, payload: dict[str, Any]) -> dict[str, Any]:
    """Ranked facts for a question; errors come back as {"error": message}."""
    return _answer(payload, lambda **kw: search_response(search_memory(**kw)))


@task(TaskName.ASK, base=ReplyTask)
def ask(self: Task, payload: dict[str, Any]) -> dict[str, Any]:
    """An answer with its evidence; errors come back as {"error": message}."""
    return _answer(payload, lambda **kw: ask_response(ask_memory(**kw)))


def _answer(payload: dict[str, Any], run: Callable[..., BaseModel]) -> dict[str, Any]:
    """One question over the space's memory and its sessions not yet committed."""
    p = QueryPayload.model_validate(payload)
    observe_wait(Queue.QUERY, p.enqueued_at)
    ctx, coord = runtime.context(), runtime.coordination()
    # background work in this process steps aside while the question runs (common/priority.py)
    with questions.answering():
        try:
            pending = pending_sessions(ctx.store, coord.jobs, coord.sequence, p.tenant, p.space)
            with budget.deadline_scope(p.reply_by):  # no model call once the caller is gone
                reply = run(
                    ctx=ctx,
                    tenant=p.tenant,
                    space=p.space,
                    question=p.question,
                    k=p.k,
                    mode=p.mode,
                    explain=p.explain,
                    pending=pending,
                    min_score=p.min_score,
                    filters=p.filters,
                    now=p.as_of,
                    profiles=p.profiles,
                )
        except AtomMemError as exc:
            return failure(exc)
    return reply.model_dump(mode="json")
