"""A real `celery worker` logging JSON lines on a private Redis: it ingests a session whose
every turn carries a marker word through a scripted model endpoint that throttles its first
calls (a task sent back to its queue: Celery's retry line), and gets one task whose payload
is invalid (Celery's failure line, with its traceback). Every line of its log is a JSON
object, the task lines carry the tenant, space and job ids, and the marker is nowhere."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from celery import Celery

from common.celery_config import celery_config
from common.models.session import SessionInput, Turn
from common.queues import TaskName
from common.settings import BrokerSettings, Settings
from tests.helpers.fake_llm_server import rate_limited, schema_answer, serve
from tests.helpers.redis_server import start_redis
from tests.helpers.workers import ALL_QUEUES, create_spaces, producer, worker_env
from workers.launch import WorkerProcess

pytestmark = pytest.mark.integration

MARKER = "quillivant"
SPACE = "logged"
TEXTS = [
    f"I adopted a {MARKER} grey cat named Miso last week.",
    f"We hiked the {MARKER} coastal trail near Porto on Sunday.",
]
THROTTLED = 9  # more 429s than a call's tries (3): a task goes back to its queue
BAD_JOB = "job-with-a-bad-payload"


def bad_accept() -> dict[str, Any]:
    """An accept payload that fails validation (a blank speaker) around the marker's text."""
    turn = {"speaker": "", "text": f"Secret {MARKER} words that must not be logged."}
    return {
        "schema_version": 1,
        "enqueued_at": time.time(),
        "job_id": BAD_JOB,
        "tenant": "default",
        "space": SPACE,
        "session": {
            "session_id": "bad",
            "started_at": "2024-05-02T18:00:00Z",
            "participants": ["Maya"],
            "turns": [turn],
        },
    }


def wait_for_line(log: Path, needle: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while needle not in log.read_text(errors="replace"):
        assert time.monotonic() < deadline, f"no {needle!r} in the worker's log"
        time.sleep(0.2)


def test_worker_logs_are_json_lines_with_ids_and_no_text(tmp_path: Path) -> None:
    session = SessionInput(
        session_id="s1",
        started_at=datetime(2024, 5, 1, 18, tzinfo=UTC),
        participants=["Maya", "Leo"],
        turns=[Turn(speaker=("Maya", "Leo")[i % 2], text=t) for i, t in enumerate(TEXTS)],
    )
    log = tmp_path / "worker.log"
    create_spaces(tmp_path, [SPACE])
    server = start_redis(tmp_path / "redis", appendonly=False)
    try:
        with serve(schema_answer) as model:
            model.then(*[rate_limited(0.2)] * THROTTLED)
            env = worker_env(server.url(), tmp_path) | {
                "ATOMMEM_LOG__FORMAT": "json",
                "ATOMMEM_FAIR__ENABLED": "true",
                "ATOMMEM_LLM__BACKEND": "openai",
                "ATOMMEM_LLM__GENERAL__BASE_URL": model.base_url,
                "ATOMMEM_LLM__GENERAL__MODEL": "fake",
                "ATOMMEM_LLM__STRUCTURED_OUTPUT": "json_schema",
                "ATOMMEM_LLM__BACKOFF_S": "0.1",
            }
            worker = WorkerProcess(env, log, ALL_QUEUES)
            try:
                worker.wait_ready()
                client = producer(server.url())
                (job,) = client.submit("default", SPACE, [session])
                (done,) = client.wait("default", [job.job_id], timeout=300)
                app = Celery("bad-producer")
                app.conf.update(celery_config(Settings(broker=BrokerSettings(url=server.url()))))
                app.send_task(TaskName.ACCEPT.value, kwargs={"payload": bad_accept()})
                wait_for_line(log, "raised unexpected")
            finally:
                worker.stop()
    finally:
        server.stop()
    assert done.state == "done", done

    text = log.read_text()
    lines = [json.loads(line) for line in text.splitlines()]  # every line is one object
    assert all({"ts", "level", "logger", "message"} <= line.keys() for line in lines)
    assert MARKER not in text

    tasks = [line for line in lines if line["logger"] == "celery.app.trace"]
    (failed,) = [line for line in tasks if "raised unexpected" in line["message"]]
    assert failed["level"] == "ERROR"
    assert "ValidationError" in failed["exc"]  # the traceback stays, the input does not
    assert (failed["tenant"], failed["space"], failed["job_id"]) == ("default", SPACE, BAD_JOB)
    assert failed["task"] == TaskName.ACCEPT.value and failed["task_id"]

    retried = [line for line in tasks if " retry: " in line["message"]]
    assert retried, "no task went back to its queue"
    ids = ("default", SPACE, job.job_id)
    for line in retried:
        assert (line["tenant"], line["space"], line["job_id"]) == ids, line

    succeeded = [line for line in tasks if " succeeded in " in line["message"]]
    accepted = [line for line in succeeded if line["task"] == TaskName.ACCEPT.value]
    assert accepted and all((a["tenant"], a["space"], a["job_id"]) == ids for a in accepted)
    # lane tasks name the step they ran: the job's chunks, from whichever lane task ran them
    extracted = [line for line in succeeded if line["task"] == TaskName.EXTRACT_NEXT.value]
    assert any(line.get("job_id") == job.job_id for line in extracted), extracted
    assert all(line.get("session_id") in (None, "s1") for line in succeeded)
