"""The JSON log line: its fields, the ids of the open scope, and nothing of a record's extra
data or a payload's text; tracing settings that would export nowhere are refused."""

from __future__ import annotations

import json
import logging

import pytest
from pydantic import ValidationError

from common.models.jobs import AcceptPayload
from common.observability import logs
from common.settings import TracingSettings

SECRET = "a turn's private words"


def record(message: str, *args: object, **extra: object) -> logging.LogRecord:
    made = logging.LogRecord("celery.app.trace", logging.INFO, __file__, 1, message, args, None)
    made.__dict__.update(extra)
    return made


def test_a_line_holds_its_message_and_the_scopes_ids_never_the_extra_data() -> None:
    context = {"name": "atommem.ingest.accept", "id": "t1", "kwargs": repr({"text": SECRET})}
    token = logs.open_scope(task_id="t1", tenant="acme", space="notes", job_id="j1", text=SECRET)
    try:
        line = logs.JsonFormatter().format(
            record("Task %(name)s[%(id)s] received", context, data=context)
        )
    finally:
        logs.close_scope(token)
    out = json.loads(line)
    assert out["message"] == "Task atommem.ingest.accept[t1] received"
    assert (out["level"], out["logger"]) == ("INFO", "celery.app.trace")
    assert (out["tenant"], out["space"], out["job_id"], out["task_id"]) == (
        "acme", "notes", "j1", "t1",
    )  # fmt: skip
    assert SECRET not in line  # neither the extra data nor an unknown id made it in


def test_a_stage_adds_its_ids_to_the_tasks_scope_and_alone_only_for_its_block() -> None:
    token = logs.open_scope(task_id="t2")
    with logs.within(tenant="acme", job_id="j2"):
        pass
    assert dict(logs.current()) == {"task_id": "t2", "tenant": "acme", "job_id": "j2"}
    logs.close_scope(token)
    with logs.within(tenant="acme"):
        assert logs.current() == {"tenant": "acme"}
    assert logs.current() == {}


def test_a_payload_that_fails_validation_does_not_quote_its_text() -> None:
    bad = {
        "enqueued_at": 0.0,
        "job_id": "j",
        "tenant": "t",
        "space": "s",
        "session": {"session_id": "x", "turns": [{"speaker": "", "text": SECRET}]},
    }
    with pytest.raises(ValidationError) as raised:
        AcceptPayload.model_validate(bad)
    assert SECRET not in str(raised.value) and SECRET not in repr(raised.value)


def test_tracing_that_exports_nowhere_is_refused() -> None:
    assert not TracingSettings().enabled
    with pytest.raises(ValidationError, match="ATOMMEM_TRACING__FILE"):
        TracingSettings(enabled=True)
