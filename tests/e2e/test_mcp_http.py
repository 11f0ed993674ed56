"""The MCP server's streamable HTTP transport on the API (`/mcp`), end to end: the SDK's own
client with a tenant's key, a real worker, a real Redis."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any

import httpx
import httpx2
import pytest
from mcp.client.streamable_http import streamable_http_client

from tests.helpers.mcp_client import Tools, connected
from tests.helpers.redis import redis_or_skip, shared_url
from tests.helpers.samples import sample_sessions
from tests.helpers.stack import ADMIN_KEY, Stack

pytestmark = pytest.mark.integration
REDIS_URL = shared_url(__name__)
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"},
    },
}


@asynccontextmanager
async def _http(url: str, key: str) -> AsyncIterator[Any]:
    headers = {"Authorization": f"Bearer {key}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as client,
        streamable_http_client(url, http_client=client) as streams,
    ):
        yield streams


@pytest.fixture(scope="module")
def alice(stack: Stack) -> Iterator[tuple[Tools, list[Any]]]:
    """Tenant `mcpa`'s session, with space `notes` holding sample sessions s1 and s3."""
    with connected(_http(f"{stack.url}/mcp", stack.key("mcpa"))) as tools:
        tools.ok("create_space", name="notes")
        first, _, third, _ = sample_sessions()
        jobs = [
            tools.ok("add_session", space="notes", session=s, wait=True) for s in [first, third]
        ]
        yield tools, jobs


def test_a_tenant_key_adds_searches_asks_and_erases(alice: tuple[Tools, list[Any]]) -> None:
    tools, jobs = alice
    names = tools.names()
    assert {"add_messages", "get_context", "correct_fact"} <= set(names) and len(names) == 15
    assert [(j["state"], j["tenant"]) for j in jobs] == [("done", "mcpa")] * 2
    hits = tools.ok("search", space="notes", question="When did Tom adopt a puppy?", k=3)["hits"]
    assert "beagle" in hits[0]["text"] and hits[0]["turn_ids"] == ["s1:3"]
    answered = tools.ok("ask", space="notes", question="Where does Priya live?")
    assert "Denver" in answered["answer"] and answered["answer_fact_ids"]
    facts = tools.ok("list_facts", space="notes", limit=1000)
    erased = tools.ok("erase_fact", space="notes", fact_id=hits[0]["fact_id"])
    assert erased["erased"]["facts_deleted"] == [hits[0]["fact_id"]]
    after = tools.ok("list_facts", space="notes", limit=1000)
    assert after["total"] == facts["total"] - 1
    assert hits[0]["fact_id"] not in {f["id"] for f in after["items"]}


def test_a_corrected_fact_answers_with_its_new_text(alice: tuple[Tools, list[Any]]) -> None:
    """Through the API's admin task on a real worker: the correction travels in the task."""
    tools, _ = alice
    facts = tools.ok("list_facts", space="notes", limit=1000)["items"]
    (fact_id,) = [f["id"] for f in facts if f["text"].startswith("Priya lives in Denver")]
    fixed = tools.ok(
        "correct_fact", space="notes", fact_id=fact_id, text="Priya lives in Aurora.",
        reason="wrong city",
    )  # fmt: skip
    assert fixed["text"] == "Priya lives in Aurora." and "Denver" in fixed["was"]
    assert "Aurora" in tools.ok("ask", space="notes", question="Where does Priya live?")["answer"]
    history = tools.ok("fact_history", space="notes", fact_id=fact_id)
    assert history["history"][-1]["correction"]["reason"] == "wrong city"


def test_a_request_without_a_tenant_key_is_refused(stack: Stack) -> None:
    url = f"{stack.url}/mcp"
    headers = {"Accept": "application/json, text/event-stream"}
    for key, status, detail in (
        (None, 401, "missing API key: send `Authorization: Bearer <key>` or `X-API-Key: <key>`"),
        ("amk_not-a-key", 401, "unknown or revoked API key"),
        (ADMIN_KEY, 403, "the admin key manages tenants; use a tenant's key"),
    ):
        sent = headers | ({"Authorization": f"Bearer {key}"} if key else {})
        response = httpx.post(url, headers=sent, content=json.dumps(INITIALIZE), timeout=30)
        assert (response.status_code, response.json()) == (status, {"detail": detail})
        # no WWW-Authenticate: an MCP client would take it for the start of an OAuth flow
        assert "www-authenticate" not in response.headers
    # a client that cannot send a bearer header sends the key as it is
    plain = headers | {"X-API-Key": stack.key("mcpc"), "Content-Type": "application/json"}
    response = httpx.post(url, headers=plain, content=json.dumps(INITIALIZE), timeout=30)
    assert response.status_code == 200 and response.json()["result"]["serverInfo"]


def test_another_tenant_sees_no_such_space(stack: Stack, alice: tuple[Tools, Any]) -> None:
    own, _ = alice
    with connected(_http(f"{stack.url}/mcp", stack.key("mcpb"))) as other:
        assert "not found: space 'notes' does not exist for tenant 'mcpb'" in other.error(
            "search", space="notes", question="Where does Priya live?"
        )
        assert "not found" in other.error("list_facts", space="notes")

        # Calls of both tenants at once: each acts for its own request's key.
        def names(tools: Tools) -> list[str]:
            return [s["name"] for s in tools.ok("list_spaces")["items"]]

        with ThreadPoolExecutor(8) as pool:
            seen = list(pool.map(names, [own, other] * 8))
        assert seen == [["notes"], []] * 8


def test_an_app_started_twice_serves_mcp_each_time() -> None:
    """The MCP transport's session manager runs once; the app builds a new one each time its
    lifespan starts (a test client, a server restarted in-process)."""
    from fastapi.testclient import TestClient

    import api.main
    from api.auth import KeyStore
    from common.settings import BrokerSettings, Settings
    from common.store import keys as store_keys

    conn = redis_or_skip(REDIS_URL, decode_responses=True)
    keys = KeyStore(conn, None)
    if not conn.exists(store_keys.tenant("restarted")):
        keys.create_tenant("restarted")
    key = str(keys.create_key("restarted")["api_key"])
    conn.close()
    app = api.main.create_app(Settings(broker=BrokerSettings(url=REDIS_URL)))
    headers = {"Authorization": f"Bearer {key}", "Accept": "application/json, text/event-stream"}
    for _ in range(2):
        with TestClient(app) as http:
            answered = http.post("/mcp", json=INITIALIZE, headers=headers)
            assert answered.status_code == 200, answered.text
            assert answered.json()["result"]["serverInfo"]["name"] == "atommem"
