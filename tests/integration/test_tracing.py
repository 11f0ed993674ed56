"""One trace per submitted session, across processes and the fair lanes: the API (uvicorn)
and a real `celery worker` on a private Redis write their spans to JSON-lines files; the
request's span, and the accept, extract, drain and profile spans of its job, share one trace
id, each stage run by a lane task it links to, and no span holds a turn's text."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.redis_server import start_redis
from tests.helpers.samples import session
from tests.helpers.stack import running_stack, wait_jobs

pytestmark = pytest.mark.integration

MARKER = "zorbulent"  # in every turn: it must appear in no span
TURNS = [
    {"speaker": "Tom", "text": f"Tom adopted a {MARKER} beagle named Biscuit last spring."},
    {"speaker": "Priya", "text": f"Priya moved to a {MARKER} flat near the river in Porto."},
    {"speaker": "Tom", "text": f"Tom started a {MARKER} pottery class on Thursday evenings."},
]


def read_spans(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def trace_of(span: dict[str, Any]) -> str:
    return str(span["context"]["trace_id"])


def test_the_request_and_every_stage_of_its_job_share_one_trace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = start_redis(tmp_path / "redis", appendonly=False)
    monkeypatch.setenv("ATOMMEM_TRACING__ENABLED", "true")
    monkeypatch.setenv("ATOMMEM_TRACING__FILE", str(tmp_path / "spans-{service}.jsonl"))
    monkeypatch.setenv("ATOMMEM_FAIR__ENABLED", "true")
    monkeypatch.setenv("ATOMMEM_PIPELINE__EXTRACT_BATCH_TURNS", "1")  # three chunks
    try:
        with running_stack(server.url(), tmp_path / "stack") as stack, stack.tenant("acme") as http:
            assert http.post("/v1/spaces", json={"name": "traced"}).status_code == 201
            reply = http.post("/v1/spaces/traced/sessions", json=session("s1", turns=TURNS))
            assert reply.status_code == 202, reply.text
            job_id = reply.json()["job_id"]
            (job,) = wait_jobs(http, [job_id])
            assert job["state"] == "done", job
        # both processes have stopped, and flushed their spans on the way out
    finally:
        server.stop()

    api = read_spans(tmp_path / "spans-atommem-api.jsonl")
    worker = read_spans(tmp_path / "spans-atommem-worker.jsonl")
    (request,) = [s for s in api if s["name"] == "POST /v1/spaces/{space}/sessions"]
    assert request["kind"] == "SpanKind.SERVER"
    assert request["resource"]["attributes"]["service.name"] == "atommem-api"
    assert request["attributes"]["atommem.tenant"] == "acme"
    assert request["attributes"]["atommem.space"] == "traced"
    trace_id = trace_of(request)

    in_trace = [s for s in worker if trace_of(s) == trace_id]
    stages = {s["name"] for s in in_trace if s["name"].startswith("atommem.")}
    assert {"atommem.accept", "atommem.extract", "atommem.drain", "atommem.profile"} <= stages
    of_job = [s for s in worker if s["attributes"].get("atommem.job_id") == job_id]
    assert {trace_of(s) for s in of_job} == {trace_id}  # no stage of the job left the trace
    chunks = {s["attributes"]["atommem.chunk"] for s in of_job if s["name"] == "atommem.extract"}
    assert chunks == {0, 1, 2}
    for s in of_job:
        assert s["attributes"]["atommem.tenant"] == "acme"
        assert s["attributes"]["atommem.space"] == "traced"
        assert s["attributes"]["atommem.session_id"] == "s1"
        assert s["resource"]["attributes"]["service.name"] == "atommem-worker"

    # Fair lanes were on: accept and extract ran from lane tasks (`*.next`), which their
    # spans link to, while their parents stay in the job's trace.
    by_id = {s["context"]["span_id"]: s for s in worker}
    lane_runs = {"run/atommem.memory.next", "run/atommem.extract.next"}
    for s in of_job:
        if s["name"] in ("atommem.accept", "atommem.extract"):
            linked = [by_id[link["context"]["span_id"]]["name"] for link in s["links"]]
            assert set(linked) & lane_runs, (s["name"], linked)
            assert s["parent_id"] is not None

    text = (tmp_path / "spans-atommem-api.jsonl").read_text()
    text += (tmp_path / "spans-atommem-worker.jsonl").read_text()
    assert MARKER not in text
