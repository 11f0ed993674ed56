"""The HTTP API end to end: real HTTP, a real worker process, a real Redis."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, cast

import httpx
import pytest

from common.settings import Settings, StoreSettings
from common.store.backends import open_store
from common.store.base import Kind
from tests.helpers.samples import sample_sessions
from tests.helpers.stack import WRITES_PER_MINUTE, Stack, wait_jobs

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def acme(stack: Stack) -> httpx.Client:
    """Tenant `acme` with space `alice` holding the four sample sessions."""
    client = stack.tenant("acme")
    assert client.post("/v1/spaces", json={"name": "alice"}).status_code == 201
    submitted = [client.post("/v1/spaces/alice/sessions", json=s) for s in sample_sessions()]
    assert all(r.status_code == 202 for r in submitted), [r.text for r in submitted]
    jobs = wait_jobs(client, [r.json()["job_id"] for r in submitted])
    assert [j["state"] for j in jobs] == ["done"] * 4, jobs
    return client


def test_the_whole_flow(acme: httpx.Client) -> None:
    space = acme.get("/v1/spaces/alice").json()
    assert space["counts"]["sessions"] == 4 and space["counts"]["facts"] > 15
    assert sorted(space["participants"]) == ["Priya", "Tom"]
    assert [s["name"] for s in acme.get("/v1/spaces").json()["items"]] == ["alice"]

    again = acme.post("/v1/spaces/alice/sessions", json=sample_sessions()[0])
    assert again.status_code == 202
    (job,) = wait_jobs(acme, [again.json()["job_id"]])
    assert job["unchanged"] is True  # the same session is the same job, and changes nothing

    found = acme.post("/v1/spaces/alice/search", json={"question": "When did Tom adopt a puppy?"})
    assert found.status_code == 200
    top = found.json()["hits"][0]
    assert "beagle" in top["text"] and top["turn_ids"] == ["s1:3"]
    assert set(top["stages"]) >= {"primary"}

    asked = acme.post("/v1/spaces/alice/ask", json={"question": "Where does Priya live?", "k": 5})
    assert asked.status_code == 200 and asked.json()["answer"]
    assert asked.json()["answer_fact_ids"]

    facts = acme.get("/v1/spaces/alice/facts", params={"limit": 5, "offset": 2}).json()
    assert facts["total"] == space["counts"]["facts"] and len(facts["items"]) == 5
    fact = facts["items"][0]
    one = acme.get(f"/v1/spaces/alice/facts/{fact['id']}").json()
    assert one == fact and one["source"]["turn_ids"]
    history = acme.get(f"/v1/spaces/alice/facts/{fact['id']}/history").json()
    assert history["current"] == fact["text"] and history["history"] == fact["history"]
    assert history["provenance"][0] == fact["source"]

    events = acme.get("/v1/spaces/alice/events").json()
    assert events["total"] == space["counts"]["events"]
    profiles = acme.get("/v1/spaces/alice/profiles").json()["items"]
    boston = [p for p in profiles if any("Boston" in v["content"] for v in p["history"])]
    assert boston and "Denver" in boston[0]["content"]
    one = acme.get(f"/v1/spaces/alice/profiles/{boston[0]['id']}").json()
    assert one["history"][0]["t_to"]


def test_sessions_jobs_and_the_recall_graph_can_be_read_back(acme: httpx.Client) -> None:
    listed = acme.get("/v1/spaces/alice/sessions").json()
    assert listed["total"] == 4
    assert [s["session_id"] for s in listed["items"]] == ["s1", "s2", "s3", "s4"]
    first = listed["items"][0]
    assert first["status"] == "done" and first["turn_count"] == len(sample_sessions()[0]["turns"])
    assert first["stats"]["facts_in"] > 0
    one = acme.get("/v1/spaces/alice/sessions/s1").json()
    assert [t["text"] for t in one["turns"]] == [t["text"] for t in sample_sessions()[0]["turns"]]
    assert acme.get("/v1/spaces/alice/sessions/nope").status_code == 404

    jobs = acme.get("/v1/jobs", params={"space": "alice"}).json()["items"]
    assert {j["session_id"] for j in jobs} >= {"s1", "s2", "s3", "s4"}
    created = [j["created_at"] for j in jobs]
    assert created == sorted(created, reverse=True)
    assert len(acme.get("/v1/jobs", params={"limit": 2}).json()["items"]) == 2
    assert acme.get("/v1/jobs", params={"space": "no/such"}).status_code == 422

    question = {"question": "What does Priya do on hikes?", "explain": True}
    found = acme.post("/v1/spaces/alice/search", json=question).json()
    graph = found["graph"]
    hit_ids = [h["fact_id"] for h in found["hits"]]
    nodes = {n["fact_id"]: n for n in graph["nodes"]}
    assert set(hit_ids) <= set(nodes)  # every hit is drawn, with its place
    assert [nodes[f]["rank"] for f in hit_ids] == list(range(len(hit_ids)))
    assert {n["role"] for n in graph["nodes"]} == {"seed", "expanded"}
    assert graph["edges"] and {e["channel"] for e in graph["edges"]} <= {"keyword", "event", "turn"}
    assert all(e["source"] in nodes and e["target"] in nodes for e in graph["edges"])
    assert graph["local_nodes"] >= len(graph["nodes"])
    flat = acme.post("/v1/spaces/alice/search", json={**question, "mode": "flat"}).json()
    assert flat["graph"] is None
    plain = acme.post("/v1/spaces/alice/search", json={"question": question["question"]}).json()
    assert plain["graph"] is None and [h["fact_id"] for h in plain["hits"]] == hit_ids


def _routes(stack: Stack) -> set[tuple[str, str]]:
    spec = httpx.get(f"{stack.url}/openapi.json").json()
    return {
        (method.upper(), path)
        for path, methods in spec["paths"].items()
        for method in methods
        if path.startswith("/v1/") and not path.startswith("/v1/admin")
    }


def test_another_tenant_gets_404_on_every_route(stack: Stack, acme: httpx.Client) -> None:
    fact = acme.get("/v1/spaces/alice/facts", params={"limit": 1}).json()["items"][0]
    event = acme.get("/v1/spaces/alice/events", params={"limit": 1}).json()["items"][0]
    profile = acme.get("/v1/spaces/alice/profiles", params={"limit": 1}).json()["items"][0]
    job = acme.post("/v1/spaces/alice/sessions", json=sample_sessions()[1]).json()["job_id"]
    ids = {
        "{space}": "alice",
        "{fact_id}": fact["id"],
        "{event_id}": event["id"],
        "{profile_id}": profile["id"],
        "{job_id}": job,
        "{session_id}": "s2",
    }
    bodies = {
        "/v1/spaces/{space}/sessions": sample_sessions()[1],
        "/v1/spaces/{space}/search": {"question": "Where does Priya live?"},
        "/v1/spaces/{space}/ask": {"question": "Where does Priya live?"},
        "/v1/spaces/{space}/messages": {"messages": [{"role": "user", "content": "Hello."}]},
        "/v1/spaces/{space}/context": {"question": "Where does Priya live?"},
        "/v1/spaces/{space}/facts/{fact_id}": {"text": "Priya lives in Paris."},  # PATCH's
    }
    intruder = stack.tenant("intruder")
    tried = set()
    for method, path in sorted(_routes(stack)):
        if path == "/v1/spaces" or "{space}" not in path and "{job_id}" not in path:
            continue  # the tenant's own collection: it sees only its own (checked below)
        url = path
        for name, value in ids.items():
            url = url.replace(name, value)
        response = intruder.request(method, url, json=bodies.get(path))
        assert response.status_code == 404, (method, path, response.text)
        assert list(response.json()) == ["detail"]
        assert "acme" not in response.text
        tried.add((method, path))
    assert len(tried) >= 14
    assert intruder.get("/v1/spaces").json()["items"] == []
    assert intruder.get("/v1/jobs").json()["items"] == []
    assert intruder.get("/v1/jobs", params={"space": "alice"}).json()["items"] == []
    # acme still has everything: nothing the intruder sent changed it
    assert acme.get(f"/v1/spaces/alice/facts/{fact['id']}").json() == fact
    assert acme.get("/v1/spaces/alice").json()["counts"]["sessions"] == 4


def test_keys_are_checked_and_admin_routes_need_the_admin_key(
    stack: Stack, acme: httpx.Client
) -> None:
    assert httpx.get(f"{stack.url}/v1/spaces").status_code == 401
    bad = httpx.get(f"{stack.url}/v1/spaces", headers={"Authorization": "Bearer amk_nope"})
    assert bad.status_code == 401
    assert acme.get("/v1/admin/tenants").status_code == 403
    with stack.admin() as admin:
        assert admin.get("/v1/spaces").status_code == 403  # the admin key holds no memory
        keys = admin.get("/v1/admin/tenants/acme/keys").json()["items"]
        assert len(keys) == 1 and "api_key" not in keys[0]
        stored = [k for k in stack.redis.keys("atommem:apikey:*")]
        assert stored and all(b"amk_" not in k for k in stored)  # only digests are kept
        spare = admin.post("/v1/admin/tenants/acme/keys").json()
        spare_client = httpx.Client(
            base_url=stack.url, headers={"Authorization": f"Bearer {spare['api_key']}"}
        )
        assert spare_client.get("/v1/spaces").status_code == 200
        assert admin.delete(f"/v1/admin/tenants/acme/keys/{spare['key_id']}").status_code == 204
        assert spare_client.get("/v1/spaces").status_code == 401


@pytest.mark.parametrize(
    ("change", "status", "needle"),
    [
        (lambda s: s["turns"][0].update(bogus=1), 422, "bogus"),
        (lambda s: s.update(started_at="last tuesday"), 422, "started_at"),
        (lambda s: s["turns"][0].update(text="   "), 422, "has no text"),
        (lambda s: s["turns"][0].update(speaker="Mallory"), 422, "unknown speaker"),
        (lambda s: s.update(turns=[s["turns"][0]] * 2001), 422, "turns"),
        (lambda s: s["turns"][0].update(text="x" * 20_001), 422, "text"),
    ],
    ids=["unknown-field", "bad-time", "empty-text", "unknown-speaker", "too-many-turns", "long"],
)
def test_bad_sessions_are_refused_and_nothing_is_stored(
    acme: httpx.Client, change: Any, status: int, needle: str
) -> None:
    body = {**sample_sessions()[0], "session_id": "bad"}
    body["turns"] = [dict(t) for t in body["turns"]]
    change(body)
    response = acme.post("/v1/spaces/alice/sessions", json=body)
    assert response.status_code in (status, 413), response.text
    assert needle in response.text or response.status_code == 413
    assert acme.get("/v1/spaces/alice").json()["counts"]["sessions"] == 4


def test_oversize_and_undecodable_bodies(acme: httpx.Client) -> None:
    big = acme.post(
        "/v1/spaces/alice/search", content=b'{"question": "' + b"a" * 300_000 + b'"}',
        headers={"Content-Type": "application/json"},
    )  # fmt: skip
    assert big.status_code == 413 and "bytes" in big.json()["detail"]
    raw = acme.post(
        "/v1/spaces/alice/sessions",
        content=b'{"session_id": "\xff\xfe"}',
        headers={"Content-Type": "application/json"},
    )
    assert raw.status_code == 400 and "UTF-8" in raw.json()["detail"]
    blank = acme.post("/v1/spaces/alice/search", json={"question": "  "})
    assert blank.status_code == 422 and "blank" in blank.text


def test_writes_are_rate_limited_per_tenant(stack: Stack, acme: httpx.Client) -> None:
    busy = stack.tenant("busy")

    def burst(name: str) -> list[int]:
        return [
            busy.post("/v1/spaces", json={"name": f"{name}{i}"}).status_code
            for i in range(WRITES_PER_MINUTE + 1)
        ]

    statuses = burst("a")
    if 429 not in statuses:  # the minute window turned during the burst: one more burst
        statuses = burst("b")
    assert statuses[0] == 201 and statuses[-1] == 429
    limited = busy.post("/v1/spaces", json={"name": "c"})
    assert limited.status_code == 429 and int(limited.headers["Retry-After"]) >= 1
    assert acme.get("/v1/spaces/alice").status_code == 200  # reads and other tenants go on


def _keys(stack: Stack) -> list[bytes]:
    """Every key of the stack's database (its client does not decode: bytes)."""
    return cast(list[bytes], stack.redis.keys("*"))


def _value(stack: Stack, key: bytes) -> bytes:
    """What `key` holds, its members joined by spaces."""
    r = stack.redis
    kind = r.type(key)
    members: Iterable[bytes] = []
    if kind == b"string":
        members = [cast(bytes, r.get(key) or b"")]
    elif kind == b"hash":
        members = cast(dict[bytes, bytes], r.hgetall(key)).values()
    elif kind == b"list":
        members = cast(list[bytes], r.lrange(key, 0, -1))
    elif kind == b"zset":
        members = cast(list[bytes], r.zrange(key, 0, -1))
    elif kind == b"set":
        members = cast(set[bytes], r.smembers(key))
    return b" ".join(members)


def test_a_space_is_rebuilt_into_a_new_one_as_jobs(stack: Stack) -> None:
    client = stack.tenant("rebuilder")
    assert client.post("/v1/spaces", json={"name": "old"}).status_code == 201
    submitted = [client.post("/v1/spaces/old/sessions", json=s) for s in sample_sessions()]
    wait_jobs(client, [r.json()["job_id"] for r in submitted])
    route = "/v1/admin/tenants/rebuilder/spaces/{}/rebuild"
    # an operator's call: it re-extracts a whole space
    assert client.post(route.format("old"), json={"into": "new"}).status_code == 403
    admin = stack.admin()
    assert (
        admin.post(
            route.format("old").replace("rebuilder", "nobody"), json={"into": "x"}
        ).status_code
        == 404
    )
    started = admin.post(route.format("old"), json={"into": "new"})
    assert started.status_code == 202, started.text
    jobs = started.json()["items"]
    assert [j["session_id"] for j in jobs] == ["s1", "s2", "s3", "s4"]
    assert {j["space"] for j in jobs} == {"new"}
    assert [j["state"] for j in wait_jobs(client, [j["job_id"] for j in jobs])] == ["done"] * 4
    old, new = (client.get(f"/v1/spaces/{name}").json()["counts"] for name in ("old", "new"))
    assert new == old and new["facts"] > 0
    fact = client.get("/v1/spaces/new/facts", params={"limit": 1}).json()["items"][0]
    assert fact["memory_version"]["extractor_backend"] == "rules"
    # the same rebuild again is the same jobs; another space's memory is never overwritten
    again = admin.post(route.format("old"), json={"into": "new"})
    assert [j["job_id"] for j in again.json()["items"]] == [j["job_id"] for j in jobs]
    assert client.post("/v1/spaces", json={"name": "other"}).status_code == 201
    other = {**sample_sessions()[0], "session_id": "elsewhere"}
    wait_jobs(client, [client.post("/v1/spaces/other/sessions", json=other).json()["job_id"]])
    refused = admin.post(route.format("old"), json={"into": "other"})
    assert refused.status_code == 409 and "elsewhere" in refused.text
    assert admin.post(route.format("old"), json={"into": "old"}).status_code == 422
    assert admin.post(route.format("nope"), json={"into": "x"}).status_code == 404
    names = sorted(s["name"] for s in client.get("/v1/spaces").json()["items"])
    assert names == ["new", "old", "other"]
    # what it built erases like any space (and leaves nothing the erasure test below looks for)
    for name in names:
        assert client.delete(f"/v1/spaces/{name}").status_code == 200


def test_erasure_leaves_nothing_behind(stack: Stack, acme: httpx.Client) -> None:
    facts = acme.get("/v1/spaces/alice/facts", params={"limit": 1000}).json()["items"]
    puppy = next(f for f in facts if "beagle" in f["text"])
    erased = acme.delete(f"/v1/spaces/alice/facts/{puppy['id']}").json()["erased"]
    assert erased["facts_deleted"] == [puppy["id"]]
    assert acme.get(f"/v1/spaces/alice/facts/{puppy['id']}").status_code == 404
    hits = acme.post("/v1/spaces/alice/search", json={"question": "Tom's beagle puppy"}).json()
    assert all(h["fact_id"] != puppy["id"] for h in hits["hits"])

    s4 = [f for f in facts if f["source"]["session_id"] == "s4"]
    gone = acme.delete("/v1/spaces/alice/sessions/s4").json()["erased"]
    assert gone["sessions_deleted"] == ["s4"]
    assert {f["id"] for f in s4} <= set(gone["facts_deleted"]) | set(gone["facts_rewritten"])
    left = acme.get("/v1/spaces/alice/facts", params={"limit": 1000}).json()["items"]
    assert all(p["session_id"] != "s4" for f in left for p in [f["source"], *f["also_from"]])
    assert acme.get("/v1/spaces/alice").json()["counts"]["sessions"] == 3

    all_jobs = {s["session_id"] for s in sample_sessions()}
    report = acme.delete("/v1/spaces/alice").json()["erased"]
    assert sorted(report["sessions_deleted"]) == sorted(all_jobs - {"s4"})
    assert acme.get("/v1/spaces/alice").status_code == 404
    assert acme.get("/v1/spaces").json()["items"] == []

    # Redis: no key of the space or its jobs is left (the tenant record and key stay).
    leftover = [k.decode() for k in _keys(stack) if b":acme:" in k]
    assert [k for k in leftover if not k.startswith("atommem:rate:")] == []
    # ... and no value anywhere in Redis (job payloads, task replies, queues) holds its text.
    assert not [k for k in _keys(stack) if b"beagle" in _value(stack, k)]
    # Qdrant: stop the worker that owns the local store, then look in every collection.
    stack.worker.stop()
    settings = Settings(store=StoreSettings(qdrant_path=stack.data / "qdrant"))
    store = open_store(settings.store, settings.embedding.dimension)
    try:
        for kind in Kind:
            assert store.count(kind, "acme", "alice") == 0, kind
            assert store.count(kind, "acme", None) == 0, kind
    finally:
        store.close()
