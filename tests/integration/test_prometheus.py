"""The metrics as a real Prometheus server sees them: it scrapes the API's /metrics (on the
admin key) and a worker's port on loopback while sessions go through, and with the prefork
pool the children's samples arrive summed on the worker's one port."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import httpx
import pytest
from celery import Celery

from common.celery_config import celery_config
from common.models.jobs import TaskPayload
from common.queues import SHARED_PRIORITY, Queue, TaskName
from common.settings import BrokerSettings, Settings
from tests.helpers.ports import free_port
from tests.helpers.prometheus import ForkingWorker, Prometheus, Target, binary
from tests.helpers.redis_server import RedisServer, start_redis
from tests.helpers.samples import sample_sessions
from tests.helpers.stack import ADMIN_KEY, Stack, running_stack, wait_jobs
from tests.helpers.workers import worker_env

pytestmark = pytest.mark.integration

T = TypeVar("T")
SUBMIT = 'route="/v1/spaces/{space}/sessions",method="POST",status="202"'


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    binary()  # skip before starting anything where Prometheus is missing
    server = start_redis(tmp_path / "redis", appendonly=False)
    yield server
    server.stop()


def eventually(read: Callable[[], T], done: Callable[[T], bool], timeout: float = 120) -> T:
    """Poll a query until its samples satisfy `done` (a deadline on waiting, not a timing
    assertion: scrapes come every second, so the samples land a little after the events)."""
    deadline = time.monotonic() + timeout
    while True:
        found = read()
        if done(found):
            return found
        assert time.monotonic() < deadline, found
        time.sleep(0.5)


def test_prometheus_scrapes_the_api_and_a_worker(
    redis_server: RedisServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    worker_port = free_port()
    monkeypatch.setenv("ATOMMEM_METRICS__PORT", str(worker_port))
    monkeypatch.setenv("ATOMMEM_METRICS__STORE_REFRESH_S", "1")
    with running_stack(redis_server.url(), tmp_path / "stack") as stack:
        api_port = int(stack.url.rsplit(":", 1)[1])
        prom = Prometheus(
            tmp_path / "prometheus",
            [Target("api", api_port, token=ADMIN_KEY), Target("worker", worker_port)],
        )
        try:
            prom.wait_ready()
            _drive(stack, prom)
        finally:
            prom.stop()


def _drive(stack: Stack, prom: Prometheus) -> None:
    client = stack.tenant("acme")
    assert client.post("/v1/spaces", json={"name": "alice"}).status_code == 201
    submitted = [client.post("/v1/spaces/alice/sessions", json=s) for s in sample_sessions()]
    assert all(r.status_code == 202 for r in submitted), [r.text for r in submitted]
    jobs = wait_jobs(client, [r.json()["job_id"] for r in submitted])
    assert [j["state"] for j in jobs] == ["done"] * len(jobs), jobs

    eventually(prom.targets_up, lambda up: up == {"api": "up", "worker": "up"})
    # /metrics is on the admin key: a tenant's key or none is refused
    assert httpx.get(f"{stack.url}/metrics").status_code == 401
    assert client.get("/metrics").status_code == 403
    assert client.get("/no/such/route").status_code == 404
    done = eventually(
        lambda: prom.total('atommem_jobs_total{outcome="done"}'), lambda n: n >= len(jobs)
    )
    assert done == len(jobs)  # each job ends once, whatever its tasks' retries
    ran = eventually(
        lambda: prom.by("sum by (queue) (atommem_task_duration_seconds_count)", "queue"),
        lambda v: all(v.get(q, 0) > 0 for q in ("ingest", "extract", "memory")),
    )
    assert set(ran) <= {q.value for q in Queue}
    posted = eventually(
        lambda: prom.total(f"atommem_http_requests_total{{{SUBMIT}}}"),
        lambda n: n >= len(submitted),
    )
    assert posted == len(submitted)
    # the route template, never the raw path of a space or of a route that is not there
    assert not prom.query('atommem_http_requests_total{route=~".*(alice|such).*"}')
    refused = 'atommem_http_requests_total{route="/metrics",status=~"401|403"}'
    eventually(lambda: prom.by(refused, "status"), lambda v: set(v) == {"401", "403"})
    unmatched = 'atommem_http_requests_total{route="unmatched",status="404"}'
    assert eventually(lambda: prom.total(unmatched), lambda n: n > 0) >= 1
    depths = eventually(
        lambda: prom.by("atommem_queue_depth", "queue"), lambda v: len(v) == len(Queue)
    )
    assert set(depths) == {q.value for q in Queue}
    assert set(depths.values()) == {0.0}  # every job is done: nothing waits
    lanes = prom.by("atommem_lane_depth", "lane")
    assert lanes == {"extract": 0.0, "memory": 0.0}
    slots = prom.by('atommem_worker_slots{job="worker"}', "queue")
    assert slots == {q.value: 2.0 for q in Queue}  # the stack's worker: two threads
    assert prom.total('atommem_queue_wait_seconds_count{queue="extract"}') > 0

    def facts() -> float:
        # a count follows a store-owning task, at most once a second here: a search is one
        client.post("/v1/spaces/alice/search", json={"question": "Where does Priya live?"})
        return prom.total('atommem_store_points{job="worker",kind="facts"}')

    eventually(facts, lambda n: n > 0)
    kinds = prom.by('atommem_store_points{job="worker"}', "kind")
    assert set(kinds) == {"facts", "events", "profiles", "sessions", "spaces"}
    assert kinds["sessions"] == len(jobs) and kinds["spaces"] == 1
    assert prom.total("atommem_store_bytes") > 0


def test_the_prefork_pools_children_are_summed_on_one_port(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    """Lane tasks with nothing waiting in the lane return at once and touch only Redis: sent
    before the worker starts, both idle children take some, and every one is counted."""
    sent = 40
    url = redis_server.url()
    app = Celery("producer")
    app.conf.update(celery_config(Settings(broker=BrokerSettings(url=url))))
    body = TaskPayload(enqueued_at=time.time()).model_dump(mode="json")
    for _ in range(sent):
        app.send_task(
            TaskName.EXTRACT_NEXT.value, kwargs={"payload": body}, priority=SHARED_PRIORITY
        )
    app.close()

    samples = tmp_path / "multiproc"
    samples.mkdir()
    port = free_port()
    env = worker_env(url, tmp_path / "data")
    env |= {"ATOMMEM_METRICS__PORT": str(port), "PROMETHEUS_MULTIPROC_DIR": str(samples)}
    worker = ForkingWorker(env, tmp_path / "worker.log", "extract", concurrency=2)
    prom = Prometheus(tmp_path / "prometheus", [Target("worker", port)])
    try:
        worker.wait_ready()
        prom.wait_ready()
        children = worker.children()
        assert len(children) == 2, children
        success = 'atommem_task_duration_seconds_count{queue="extract",outcome="success"}'
        ran = eventually(lambda: prom.total(success), lambda n: n >= sent)
        assert ran == sent
        assert len(prom.query(success)) == 1  # one series: the children's samples summed
        # ...and they came from both children, each writing its own file
        writers = {p.stem.rsplit("_", 1)[1] for p in samples.glob("histogram_*.db")}
        assert {str(c) for c in children} <= writers, (children, writers)
        assert prom.by('atommem_worker_slots{queue="extract"}', "queue") == {"extract": 2.0}
        running = prom.by('atommem_tasks_in_progress{queue="extract"}', "queue")
        assert running == {"extract": 0.0}
    finally:
        prom.stop()
        worker.stop()
