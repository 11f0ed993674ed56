"""Odd input over real HTTP: ids that do not survive a URL, times at the edges of the accepted
range, bodies that are not UTF-8 JSON, and refused writes against the write quota."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from api.client import AtomMem, NotFoundError
from tests.helpers.samples import session
from tests.helpers.stack import WRITES_PER_MINUTE, Stack, wait_jobs

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def odd(stack: Stack) -> Iterator[httpx.Client]:
    """Tenant `odd` with an empty space `s`."""
    with stack.tenant("odd") as client:
        assert client.post("/v1/spaces", json={"name": "s"}).status_code == 201
        yield client


def _sessions(client: httpx.Client, space: str) -> int:
    return int(client.get(f"/v1/spaces/{space}").json()["counts"]["sessions"])


def test_sdk_ids_reach_only_their_own_resource(stack: Stack, odd: httpx.Client) -> None:
    key = odd.headers["Authorization"].removeprefix("Bearer ")
    with AtomMem(stack.url, key) as mem:
        mem.create_space("paths")
        # Ids a URL would change are refused at submit; the others are kept as they are.
        for bad in (".", "..", "a/b", " "):
            refused = odd.post("/v1/spaces/paths/sessions", json=session(bad))
            assert refused.status_code == 422 and "session_id" in refused.text, (bad, refused.text)
        kept = ["q", "p", "a", "q#2", "p?x=1", "%2e%2e", "%2E%2E", "..x", "é"]
        jobs = [
            mem.add("paths", session(s, f"{name} adopted a cat."))
            for s, name in zip(
                kept, ["Ann", "Ben", "Cy", "Dee", "Eve", "Fay", "Gus", "Hal", "Ida"], strict=True
            )
        ]
        assert [j.state for j in mem.wait([j.job_id for j in jobs], timeout=300)] == ["done"] * 9
        assert [mem.job(j.job_id).session_id for j in jobs] == kept

        # The SDK never sends an id a URL would rewrite.
        for bad in ("..", ".", ""):
            with pytest.raises(ValueError, match="path segment"):
                mem.delete("paths", session_id=bad)
        with pytest.raises(NotFoundError):
            mem.delete("paths", session_id="a/b")  # one segment, and no such session
        assert mem.get_space("paths").counts.sessions == 9

        # Every other odd id erases exactly its own session.
        for gone, sid in enumerate(["q#2", "p?x=1", "%2e%2e", "%2E%2E", "..x", "é"], start=1):
            assert mem.delete("paths", session_id=sid).erased.sessions_deleted == [sid]
            assert mem.get_space("paths").counts.sessions == 9 - gone


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("started_at", "1899-12-31T23:59:59Z"),
        ("started_at", "3000-01-01T00:00:00Z"),
        ("started_at", "2999-12-31T23:30:00-01:00"),  # 3000-01-01 in UTC
        ("started_at", "1900-01-01T00:30:00+01:00"),  # 1899-12-31 in UTC
        ("started_at", "0001-01-01T00:00:00+01:00"),
        ("started_at", "9999-12-31T23:59:59-01:00"),
        ("started_at", "0001-01-01T00:00:00"),
        ("seq", 2**53 + 1),
        ("seq", -1),
    ],
)
def test_orders_out_of_range_are_refused_naming_the_field(
    odd: httpx.Client, field: str, value: Any
) -> None:
    body = session("range", **{field: value})
    refused = odd.post("/v1/spaces/s/sessions", json=body)
    assert refused.status_code == 422, refused.text
    assert field in refused.json()["detail"]
    assert _sessions(odd, "s") == 0


def test_orders_at_the_edges_of_the_range_work_end_to_end(odd: httpx.Client) -> None:
    assert odd.post("/v1/spaces", json={"name": "edges"}).status_code == 201
    edges = [
        session("first", started_at="1900-01-01T00:00:00Z"),
        session("local", started_at="1900-01-01T01:00:00+01:00"),
        session(
            "late", started_at="2999-12-31T23:59:59Z", text="Tom will move to Mars in 999 years."
        ),
        session("offset", started_at="3000-01-01T00:59:59+01:00"),
        session("zero", seq=0),
        session("big", seq=2**53, text="Tom adopted a beagle puppy the day after tomorrow."),
        session("past-2038", seq=2**31),
    ]
    submitted = [odd.post("/v1/spaces/edges/sessions", json=s) for s in edges]
    assert [r.status_code for r in submitted] == [202] * len(edges), [r.text for r in submitted]
    jobs = wait_jobs(odd, [r.json()["job_id"] for r in submitted])
    assert [j["state"] for j in jobs] == ["done"] * len(edges), jobs
    question = {"question": "What is Tom's beagle called?", "mode": "full"}
    found = odd.post("/v1/spaces/edges/search", json=question)
    assert found.status_code == 200, found.text
    assert "Biscuit" in found.json()["hits"][0]["text"]
    asked = odd.post("/v1/spaces/edges/ask", json=question)
    assert asked.status_code == 200 and asked.json()["answer"], asked.text


def _post(client: httpx.Client, content: Any, **headers: str) -> httpx.Response:
    return client.post(
        "/v1/spaces/s/search",
        content=content,
        headers={"Content-Type": "application/json", **headers},
    )


@pytest.mark.parametrize(
    ("content", "status", "needle"),
    [
        (b'{"question": "\\ud800"}', 400, "surrogate"),
        (b'{"question": "ok", "k": 1, "x\\udfff": 1}', 400, "surrogate"),
        (b'{"question": ' + b"[" * 50_000 + b"]" * 50_000 + b"}", 400, "nested"),
        (b'{"question": "where?",', 400, "line 1 column"),
        (json.dumps({"question": "where?"}).encode("utf-16"), 400, "UTF-8"),
        (json.dumps({"question": "where?"}).encode("utf-16-le"), 400, "JSON"),
        (b"\xef\xbb\xbf" + json.dumps({"question": "where?"}).encode(), 400, "JSON"),
    ],
    ids=["surrogate", "surrogate-key", "nested", "malformed", "utf-16", "utf-16-le", "bom"],
)
def test_bodies_that_are_not_utf8_json_get_400_naming_why(
    odd: httpx.Client, content: bytes, status: int, needle: str
) -> None:
    refused = _post(odd, content)
    assert refused.status_code == status, refused.text
    assert needle in refused.json()["detail"]


def test_a_session_with_a_lone_surrogate_is_refused_whole(odd: httpx.Client) -> None:
    body = json.dumps(session("s\ud800x")).encode("utf-8", "surrogatepass")
    raw = json.dumps(session("s\ud800x"))  # json escapes it: valid UTF-8 bytes
    for content in (raw.encode(), body):
        refused = odd.post(
            "/v1/spaces/s/sessions", content=content, headers={"Content-Type": "application/json"}
        )
        assert refused.status_code == 400, refused.text
    assert _sessions(odd, "s") == 0


def test_a_chunked_body_over_the_limit_is_413(odd: httpx.Client) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"question": "'
        for _ in range(30):
            yield b"a" * 10_000
        yield b'"}'

    refused = _post(odd, chunks())
    assert refused.status_code == 413 and "bytes" in refused.json()["detail"]
    assert _post(odd, iter([b'{"question": ', b'"where?"}'])).status_code == 200


def test_every_refusal_has_one_body_shape(stack: Stack, odd: httpx.Client) -> None:
    replies = [
        odd.post("/v1/spaces/s/search", json={"question": 5}),
        odd.post("/v1/spaces/s/search", json={}),
        odd.get("/v1/spaces/s/facts", params={"limit": 0}),
        odd.post("/v1/spaces", json={"name": "-"}),
        odd.get("/v1/spaces/nope"),
        odd.get("/v1/nothing-here"),
        odd.put("/v1/spaces"),
        httpx.get(f"{stack.url}/v1/spaces"),
    ]
    assert [r.status_code for r in replies] == [422, 422, 422, 422, 404, 404, 405, 401]
    for reply in replies:
        assert reply.headers["content-type"] == "application/json"
        body = reply.json()
        assert list(body) == ["detail"] and isinstance(body["detail"], str), body
    assert "question" in replies[0].json()["detail"]
    assert "limit" in replies[2].json()["detail"]


def test_refused_writes_leave_the_quota_whole(stack: Stack) -> None:
    if time.time() % 60 > 40:  # the whole test fits in one minute window
        time.sleep(60 - time.time() % 60 + 0.5)
    with stack.tenant("quota") as client:
        refused = [
            client.delete("/v1/spaces/missing"),  # 404
            client.post("/v1/spaces", json={"name": "-bad"}),  # 422
            client.post("/v1/spaces/missing/sessions", json=session("x")),  # 404
            client.post("/v1/spaces/missing/sessions", json={"session_id": "x"}),  # 422
            client.delete("/v1/spaces/missing/facts/f1"),  # 404
        ]
        assert [r.status_code for r in refused] == [404, 422, 404, 422, 404]
        assert client.post("/v1/spaces", json={"name": "taken"}).status_code == 201
        for _ in range(WRITES_PER_MINUTE):
            assert client.post("/v1/spaces", json={"name": "taken"}).status_code == 409
        made = [client.post("/v1/spaces", json={"name": f"n{i}"}) for i in range(WRITES_PER_MINUTE)]
        assert [r.status_code for r in made] == [201] * (WRITES_PER_MINUTE - 1) + [429]
        assert int(made[-1].headers["Retry-After"]) >= 1
