"""Redis stops under a running API: every authenticated route answers 503 with `Retry-After`
and the JSON error body, and the SDK's next call after Redis is back works."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from api.client import ApiError, AtomMem, Unavailable
from tests.helpers.redis_server import start_redis
from tests.helpers.samples import session
from tests.helpers.stack import running_stack

pytestmark = pytest.mark.integration

ROUTES = [
    ("GET", "/v1/spaces", None),
    ("POST", "/v1/spaces", {"name": "more"}),
    ("GET", "/v1/spaces/notes", None),
    ("DELETE", "/v1/spaces/notes", None),
    ("POST", "/v1/spaces/notes/sessions", session("s2")),
    ("POST", "/v1/spaces/notes/search", {"question": "Who adopted a beagle?"}),
    ("GET", "/v1/spaces/notes/facts", None),
    ("GET", "/v1/jobs/j1", None),
]


def test_redis_down_is_503_json_and_the_sdk_recovers(tmp_path: Path) -> None:
    server = start_redis(tmp_path / "redis")
    try:
        with running_stack(server.url(0), tmp_path / "stack") as stack:
            key = stack.key("t")
            with AtomMem(stack.url, key) as mem:
                mem.create_space("notes")
                (job,) = mem.wait(mem.add("notes", session("s1")).job_id, timeout=300)
                server.stop()
                tenant = httpx.Client(
                    base_url=stack.url, headers={"Authorization": f"Bearer {key}"}
                )
                admin = stack.admin()
                replies = [tenant.request(m, p, json=body) for m, p, body in ROUTES]
                replies.append(admin.get("/v1/admin/tenants"))
                replies.append(admin.post("/v1/admin/tenants/t/keys"))
                for reply in replies:
                    assert reply.status_code == 503, (reply.request.url, reply.text)
                    assert reply.headers["content-type"] == "application/json"
                    assert int(reply.headers["Retry-After"]) >= 1
                    assert list(reply.json()) == ["detail"] and "Redis" in reply.json()["detail"]
                with pytest.raises(Unavailable) as down:
                    mem.job(job.job_id)
                assert down.value.status == 503 and down.value.retry_after >= 1

                server.start()
                assert mem.job(job.job_id).state == "done"  # the same SDK connection
                deadline = time.monotonic() + 120
                while True:  # the worker reconnects in its own time
                    try:
                        assert [s.name for s in mem.list_spaces()] == ["notes"]
                        break
                    except ApiError as exc:  # 503 or 504 until it answers again
                        assert exc.status in (503, 504) and time.monotonic() < deadline
                        time.sleep(1)
                assert mem.search("notes", "Who adopted a beagle?").hits
                tenant.close()
                admin.close()
    finally:
        server.stop()
