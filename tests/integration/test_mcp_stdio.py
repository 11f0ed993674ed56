"""The MCP server over stdio as a desktop client runs it: `atommem mcp` in a subprocess on an
embedded store, driven by the SDK's own client; the sample conversation goes in once."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.helpers.mcp_client import Tools, connected
from tests.helpers.samples import SAMPLE
from workers.launch import ROOT

pytestmark = pytest.mark.integration
TOOLS = {
    "list_spaces", "create_space", "add_session", "add_messages", "get_job", "search", "ask",
    "get_profile", "list_facts", "list_events", "fact_history", "erase_fact", "erase_session",
}  # fmt: skip
# What would point the command at a broker or a server instead of the embedded store.
ELSEWHERE = ("ATOMMEM_BROKER__URL", "ATOMMEM_API__URL", "ATOMMEM_API__KEY")


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Tools, list[dict[str, Any]]]]:
    """`atommem mcp` on a fresh data directory, with the four sample sessions added (each
    with `wait`), and the jobs they ended in."""
    data = tmp_path_factory.mktemp("mcp")
    env = {k: v for k, v in os.environ.items() if k not in ELSEWHERE}
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "cli", "--data-dir", str(data), "mcp"],
        env=env,
        cwd=ROOT,
    )
    sample = json.loads(SAMPLE.read_text(encoding="utf-8"))
    with (data / "server.log").open("w") as log, connected(stdio_client(params, log)) as tools:
        tools.ok("create_space", name="demo")
        jobs = [
            tools.ok(
                "add_session",
                space="demo",
                session={**s, "participants": sample["participants"]},
                wait=True,
            )
            for s in sample["sessions"]
        ]
        yield tools, jobs


def test_tools_are_listed_with_the_models_schemas(served: tuple[Tools, Any]) -> None:
    tools, jobs = served
    schemas = tools.names()
    assert set(schemas) == TOOLS
    session = schemas["add_session"]["$defs"]["SessionBody"]
    assert set(session["required"]) == {"session_id", "started_at", "participants", "turns"}
    assert schemas["search"]["properties"]["k"]["anyOf"][0] == {
        "maximum": 100, "minimum": 1, "type": "integer"
    }  # fmt: skip
    assert [j["state"] for j in jobs] == ["done"] * 4
    assert [s["name"] for s in tools.ok("list_spaces")["items"]] == ["demo"]


def test_search_and_ask_answer_with_evidence(served: tuple[Tools, Any]) -> None:
    tools, _ = served
    found = tools.ok("search", space="demo", question="When did Tom adopt a puppy?", k=3)
    assert len(found["hits"]) == 3
    top = found["hits"][0]
    assert "beagle" in top["text"] and top["turn_ids"] == ["s1:3"] and top["fact_id"]
    answered = tools.ok("ask", space="demo", question="Where does Priya live?")
    assert "Denver" in answered["answer"]
    evidence = {h["fact_id"]: h for h in answered["hits"]}
    assert answered["answer_fact_ids"] and set(answered["answer_fact_ids"]) <= set(evidence)
    assert any(h["turn_ids"] == ["s3:5"] for h in evidence.values())


def _lives(profile: dict[str, Any]) -> list[tuple[str, str, str | None]]:
    return [
        (p["content"], p["valid_from"], p["valid_to"])
        for p in profile["profiles"]
        if "lives in" in p["content"]
    ]


def test_profile_as_of_a_date_before_and_after_the_move(served: tuple[Tools, Any]) -> None:
    tools, _ = served
    before = tools.ok("get_profile", space="demo", person="Priya", as_of="2024-05-01")
    assert _lives(before) == [
        ("Priya lives in Boston with Priya's sister Anika.", "2024-03-04", "2024-06-02")
    ]
    after = tools.ok("get_profile", space="demo", person="priya", as_of="2024-07-01")
    denver = [("Priya lives in Denver now, and Priya misses Anika a lot.", "2024-06-02", None)]
    assert after["person"] == "Priya" and _lives(after) == denver
    assert _lives(tools.ok("get_profile", space="demo", person="Priya")) == denver
    assert "people with profiles: Priya, Tom" in tools.error(
        "get_profile", space="demo", person="Bob"
    )


def test_messages_become_a_session_named_by_their_content(served: tuple[Tools, Any]) -> None:
    tools, _ = served
    chat = {
        "space": "demo",
        "time": "2024-08-01T09:00:00Z",
        "messages": [
            {"speaker": "Tom", "text": "Biscuit learned to fetch the newspaper this morning."},
            {"speaker": "Priya", "text": "I adopted a grey cat named Mochi last week."},
        ],
    }
    queued = tools.ok("add_messages", **chat)
    done = tools.ok("add_messages", **chat, wait=True)
    assert done["job_id"] == queued["job_id"] and done["state"] == "done"
    assert done["session_id"].startswith("mcp-") and done["counts"]["facts_stored"] >= 1
    assert tools.ok("get_job", job_id=queued["job_id"])["state"] == "done"
    hits = tools.ok("search", space="demo", question="What is the name of Priya's cat?")["hits"]
    assert "Mochi" in hits[0]["text"]


def test_erased_fact_is_gone(served: tuple[Tools, Any]) -> None:
    tools, _ = served
    facts = tools.ok("list_facts", space="demo", limit=1000)
    (fact,) = [f for f in facts["items"] if "lopsided" in f["text"]]
    history = tools.ok("fact_history", space="demo", fact_id=fact["id"])
    assert history["provenance"][0]["turn_ids"] == ["s1:2"]
    erased = tools.ok("erase_fact", space="demo", fact_id=fact["id"])
    assert erased["erased"]["facts_deleted"] == [fact["id"]]
    after = tools.ok("list_facts", space="demo", limit=1000)
    assert after["total"] == facts["total"] - 1
    assert fact["id"] not in {f["id"] for f in after["items"]}
    assert "not found" in tools.error("fact_history", space="demo", fact_id=fact["id"])
    events = tools.ok("list_events", space="demo", limit=1)
    assert events["total"] >= 1 and len(events["items"]) == 1


def test_bad_input_is_a_tool_error_naming_the_field(served: tuple[Tools, Any]) -> None:
    tools, _ = served
    assert "invalid: k: Input should be a valid integer" in tools.error(
        "search", space="demo", question="Where does Priya live?", k="many"
    )
    assert "not found: space 'nowhere' does not exist" in tools.error(
        "ask", space="nowhere", question="Where does Priya live?"
    )
    assert "invalid: question:" in tools.error("ask", space="demo", question="")
    assert "question: Value error, the question is blank" in tools.error(
        "search", space="demo", question="   "
    )
    stranger = {
        "session_id": "x1",
        "started_at": "2024-08-02T10:00:00Z",
        "participants": ["Priya"],
        "turns": [{"speaker": "Mallory", "text": "I live in Paris."}],
    }
    assert "session: Value error, turn 0: unknown speaker 'Mallory'" in tools.error(
        "add_session", space="demo", session=stranger
    )
    assert "session.started_at: Value error, must be an ISO 8601" in tools.error(
        "add_session", space="demo", session={**stranger, "started_at": "yesterday"}
    )
    assert "conflict: space 'demo' already exists" in tools.error("create_space", name="demo")
    # the server keeps serving
    assert tools.ok("list_spaces")["items"][0]["counts"]["sessions"] >= 4
