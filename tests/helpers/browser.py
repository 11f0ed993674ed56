"""What the inspector's browser tests and its screenshot script share: the data they ingest,
the browser they drive (Debian's Chromium; nothing downloads one), and an API without workers."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import redis

from tests.helpers.ports import free_port
from tests.helpers.samples import sample_sessions
from tests.helpers.stack import ADMIN_KEY, Stack, api_ready
from workers.launch import ROOT

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page, Playwright

CHROMIUM = Path("/usr/bin/chromium")
SPACE = "alice"
XSS = (
    'Tom pasted <script>window.__pwned=1</script> and <img src=x onerror="window.__pwned=2"> '
    "into the chat."
)
# A fifth session of pre-extracted facts (kept verbatim): one the space holds already (a
# duplicate), one that updates where Priya lives, and one full of markup.
CHANGES: dict[str, Any] = {
    "session_id": "s5",
    "started_at": "2024-09-02T18:00:00",
    "participants": ["Priya", "Tom"],
    "turns": [
        {
            "id": "s5:1",
            "speaker": "Tom",
            "text": "Still teaching chemistry at Lincoln High School, as ever.",
            "facts": ["Tom teaches chemistry at Lincoln High School."],
        },
        {
            "id": "s5:2",
            "speaker": "Priya",
            "text": "We found a bigger place, so I live in Aurora now. I still miss Anika.",
            "facts": ["Priya lives in Aurora now, and Priya misses Anika a lot."],
        },
        {"id": "s5:3", "speaker": "Tom", "text": "Look what I pasted!", "facts": [XSS]},
    ],
}


def sessions() -> list[dict[str, Any]]:
    """The bundled four-session sample, then the session of changes."""
    return [*sample_sessions(), CHANGES]


def missing_browser() -> str | None:
    """Why the browser tests cannot run here, or None."""
    if importlib.util.find_spec("playwright") is None:
        return "playwright is not installed (pip install -e '.[test]')"
    if not CHROMIUM.exists():
        return f"Chromium is not installed at {CHROMIUM} (apt-get install chromium)"
    return None


@dataclass
class Seeded:
    key: str
    other_key: str
    jobs: list[dict[str, Any]]


def seed(stack: Stack, timeout: float = 300) -> Seeded:
    """Tenant `acme` with space `alice` holding the five sessions, all done; tenant `intruder`
    with nothing."""
    key = stack.key("acme")
    headers = {"Authorization": f"Bearer {key}"}
    with httpx.Client(base_url=stack.url, headers=headers, timeout=120) as client:
        assert client.post("/v1/spaces", json={"name": SPACE}).status_code == 201
        ids = []
        for body in sessions():
            sent = client.post(f"/v1/spaces/{SPACE}/sessions", json=body)
            assert sent.status_code == 202, sent.text
            ids.append(sent.json()["job_id"])
        deadline = time.monotonic() + timeout
        while True:
            jobs = [client.get(f"/v1/jobs/{j}").json() for j in ids]
            if all(j["state"] in ("done", "failed") for j in jobs):
                break
            assert time.monotonic() < deadline, jobs
            time.sleep(0.3)
    assert [j["state"] for j in jobs] == ["done"] * len(ids), jobs
    return Seeded(key=key, other_key=stack.key("intruder"), jobs=jobs)


def launch(playwright: Playwright) -> Browser:
    return playwright.chromium.launch(executable_path=str(CHROMIUM))


def sign_in(page: Page, url: str, key: str, then: str = "#/") -> None:
    """Open the inspector, sign in with `key` and wait for the page the key leads to."""
    page.goto(f"{url}/ui/{then}")
    page.fill("#key", key)
    page.click("form.signin button[type=submit]")
    page.wait_for_selector("#sign-out:not([hidden])")


@contextmanager
def api_without_workers(env: dict[str, str], redis_url: str, log: Path) -> Iterator[str]:
    """The API alone on `redis_url` (flushed), where no worker listens, waiting 2 s for one;
    yields its URL."""
    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    port = free_port()
    env = {**env, "ATOMMEM_BROKER__URL": redis_url, "ATOMMEM_API__QUERY_TIMEOUT_S": "2"}
    with log.open("wb") as out:
        api = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "--factory", "api.main:create_app",
             "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
        url = f"http://127.0.0.1:{port}"
        try:
            api_ready(url, api, log)
            yield url
        finally:
            api.terminate()
            api.wait(30)
            client.flushdb()
            client.close()


def tenant_key(url: str, name: str) -> str:
    """A new key of a new tenant, through the admin routes (Redis only: no worker needed)."""
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {ADMIN_KEY}"}) as admin:
        assert admin.post("/v1/admin/tenants", json={"name": name}).status_code == 201
        return str(admin.post(f"/v1/admin/tenants/{name}/keys").json()["api_key"])
