"""The MCP server over stdio as a desktop client runs it: `atommem mcp` in a subprocess on an
embedded store, driven by the SDK's own client; the sample conversation goes in once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.helpers.mcp_client import Tools, connected
from tests.helpers.samples import SAMPLE
from workers.launch import ROOT

pytestmark = pytest.mark.integration
TOOLS = {
    "list_spaces", "create_space", "add_session", "add_messages", "get_job", "search", "ask",
    "get_context", "get_profile", "list_facts", "list_events", "fact_history", "erase_fact",
    "correct_fact", "erase_session",
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
    found = tools.ok(
        "search", space="demo", question="When did Tom adopt a puppy?", k=3, min_score=0.0
    )
    assert len(found["hits"]) == 3
    top = found["hits"][0]
    assert "beagle" in top["text"] and top["turn_ids"] == ["s1:3"] and top["fact_id"]
    answered = tools.ok("ask", space="demo", question="Where does Priya live?")
    assert "Denver" in answered["answer"]
    evidence = {h["fact_id"]: h for h in answered["hits"]}
    # a question about where someone lives is led by the profile in force, which it cites
    (cited,) = answered["answer_fact_ids"]
    assert cited == f"profile:{answered['profiles'][0]['profile_id']}"
    assert "Denver" in answered["profiles"][0]["content"]
    assert any(h["turn_ids"] == ["s3:5"] for h in evidence.values())
    # asked as of a day before the move, the profile then in force answers
    before = tools.ok(
        "ask", space="demo", question="Where does Priya live?", as_of="2024-05-01T12:00:00"
    )
    assert "Boston" in before["answer"] and "Denver" not in before["answer"]


def test_a_context_block_leads_with_the_profile_in_force(served: tuple[Tools, Any]) -> None:
    tools, _ = served
    now = tools.ok("get_context", space="demo", question="Where does Priya live?")
    (first, *_) = now["items"]
    assert first["kind"] == "profile" and "Denver" in first["text"]
    assert now["text"].index("[P1]") < now["text"].index("[F1]")
    before = tools.ok(
        "get_context", space="demo", question="Where does Priya live?", as_of="2024-05-01T12:00:00"
    )
    profiles = [i["text"] for i in before["items"] if i["kind"] == "profile"]
    assert any("Boston" in p for p in profiles) and not any("Denver" in p for p in profiles)


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
    after = tools.ok("get_profile", space="demo", person=" Priya ", as_of="2024-07-01")
    denver = [("Priya lives in Denver now, and Priya misses Anika a lot.", "2024-06-02", None)]
    assert after["person"] == "Priya" and _lives(after) == denver
    # case counts, as on every other path: "priya" is someone else
    assert "not found: no profile of 'priya'" in tools.error(
        "get_profile", space="demo", person="priya"
    )
    assert _lives(tools.ok("get_profile", space="demo", person="Priya")) == denver
    assert "people with profiles: Priya, Tom" in tools.error(
        "get_profile", space="demo", person="Bob"
    )


def test_messages_become_a_session_named_by_their_content(served: tuple[Tools, Any]) -> None:
    tools, _ = served
    chat = {
        "space": "demo",
        "user": "Priya",
        "messages": [
            {"role": "system", "content": "You are Priya's assistant."},
            {
                "role": "assistant",
                "name": "Tom",
                "content": "Biscuit learned to fetch the newspaper this morning.",
                "created_at": "2024-08-01T09:00:00Z",
            },
            {"role": "user", "content": "I adopted a grey cat named Mochi last week."},
        ],
    }
    (queued,) = tools.ok("add_messages", **chat)["items"]
    (done,) = tools.ok("add_messages", **chat, wait=True)["items"]
    assert done["job_id"] == queued["job_id"] and done["state"] == "done"
    assert done["session_id"].startswith("chat-") and done["counts"]["facts_stored"] >= 1
    assert tools.ok("get_job", job_id=queued["job_id"])["state"] == "done"
    hits = tools.ok("search", space="demo", question="What is the name of Priya's cat?")["hits"]
    assert "Mochi" in hits[0]["text"]


def test_erased_fact_is_gone(served: tuple[Tools, Any]) -> None:
    tools, _ = served
    facts = tools.ok("list_facts", space="demo", limit=1000)
    (fact,) = [f for f in facts["items"] if "lopsided" in f["text"]]
    found = tools.ok("list_facts", space="demo", text="LOPSIDED")
    assert found["total"] == 1 and found["items"][0]["id"] == fact["id"]
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


def test_a_corrected_fact_reads_the_new_text_and_keeps_the_old(
    served: tuple[Tools, Any],
) -> None:
    tools, _ = served
    facts = tools.ok("list_facts", space="demo", limit=1000)["items"]
    fact, other = [f for f in facts if f["text"].startswith("Priya ")][:2]
    text = "Priya keeps a small herb garden on her balcony."
    fixed = tools.ok("correct_fact", space="demo", fact_id=fact["id"], text=text, reason="typo")
    assert fixed["fact_id"] == fact["id"] and fixed["text"] == text
    assert fixed["was"] == fact["text"] and "fact" not in fixed  # slim: no whole fact
    again = tools.ok("correct_fact", space="demo", fact_id=fact["id"], text=text)
    assert again["was"] is None
    history = tools.ok("fact_history", space="demo", fact_id=fact["id"])
    assert history["current"] == text and history["history"][-1]["correction"]["reason"] == "typo"
    said = tools.error("correct_fact", space="demo", fact_id=fact["id"], text=other["text"])
    assert "conflict: " in said and other["id"] in said
    assert "invalid: text" in tools.error("correct_fact", space="demo", fact_id="x", text="")


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


def test_arguments_are_as_strict_as_the_http_bodies(served: tuple[Tools, Any]) -> None:
    tools, _ = served
    question = "Where does Priya live?"
    for k in ("5", True):
        assert "invalid: k: Input should be a valid integer" in tools.error(
            "search", space="demo", question=question, k=k
        )
    assert "invalid: limit: Input should be a valid integer" in tools.error(
        "list_facts", space="demo", limit="5"
    )
    chat = {"messages": [{"role": "user", "name": "Tom", "content": "Hi."}]}
    assert "invalid: wait: Input should be a valid boolean" in tools.error(
        "add_messages", space="demo", wait="yes", **chat
    )
    assert tools.ok("search", space="demo", question=question, k=5)["hits"]


@pytest.mark.parametrize("dots", [".", ".."])
def test_dot_ids_are_invalid_not_a_traceback(served: tuple[Tools, Any], dots: str) -> None:
    tools, _ = served
    calls: list[tuple[str, dict[str, str]]] = [
        ("fact_history", {"space": "demo", "fact_id": dots}),
        ("erase_fact", {"space": "demo", "fact_id": dots}),
        ("correct_fact", {"space": "demo", "fact_id": dots, "text": "Priya hikes."}),
        ("erase_session", {"space": "demo", "session_id": dots}),
        ("get_job", {"job_id": dots}),
        ("list_facts", {"space": dots}),
    ]
    for name, arguments in calls:
        said = tools.error(name, **arguments)
        assert "invalid: " in said and "cannot be an id" in said, said
        assert "Error executing tool" not in said and "Traceback" not in said, said
    assert tools.ok("list_facts", space="demo", limit=1)["total"] >= 1


def test_one_person_in_either_unicode_form(served: tuple[Tools, Any]) -> None:
    """José written with a combining accent (NFD) is the José written with "é" (NFC): one
    participant, one profile, found by either form; the refusal names him once."""
    tools, _ = served
    nfc, nfd = unicodedata.normalize("NFC", "José"), unicodedata.normalize("NFD", "José")
    tools.ok("create_space", name="names")
    session = {
        "session_id": "j1",
        "started_at": "2024-04-01T10:00:00Z",
        "participants": [nfd, "Ann"],
        "turns": [
            {"speaker": nfc, "text": "I live in Lisbon with my two cats, Figo and Nata."},
            {"speaker": nfd, "text": "I work as a baker at a small shop near the river."},
            {"speaker": "Ann", "text": "That sounds lovely, I should visit Lisbon soon."},
        ],
    }
    assert tools.ok("add_session", space="names", session=session, wait=True)["state"] == "done"
    for form in (nfc, nfd):
        found = tools.ok("get_profile", space="names", person=form)
        assert found["person"] == nfc and found["profiles"]
        assert {p["person"] for p in found["profiles"]} == {nfc}
    asked = tools.ok("search", space="names", question=f"Where does {nfd} live?")
    assert asked["people"] == [nfc]
    assert "Lisbon" in asked["hits"][0]["text"]
    stranger = {**session, "session_id": "j2", "turns": [{"speaker": "Bo", "text": "Hello."}]}
    said = tools.error("add_session", space="names", session=stranger)
    assert f"unknown speaker 'Bo' (participants: {nfc}, Ann)" in said


def test_every_unreadable_line_is_answered(tmp_path: Path) -> None:
    """A line the SDK's transport cannot read gets a JSON-RPC error, with the request's id
    where the line names one, and the server keeps serving."""
    env = {k: v for k, v in os.environ.items() if k not in ELSEWHERE}
    command = [sys.executable, "-m", "cli", "--data-dir", str(tmp_path), "mcp"]
    with (tmp_path / "server.log").open("w") as log:
        server = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, env=env, cwd=ROOT
        )
        assert server.stdin is not None and server.stdout is not None

        def said(line: bytes) -> dict[str, Any]:
            assert server.stdin is not None and server.stdout is not None
            server.stdin.write(line + b"\n")
            server.stdin.flush()
            answer: dict[str, Any] = json.loads(server.stdout.readline())
            return answer

        try:
            hello = {"protocolVersion": "2025-06-18", "capabilities": {}}
            hello["clientInfo"] = {"name": "test", "version": "1"}
            start = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello}
            assert said(json.dumps(start).encode())["id"] == 0
            call = b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"search",'
            surrogate = call + b'"arguments":{"space":"demo","question":"\\ud800?"}}}'
            cases = [
                (b"garbage", None, -32700),
                (b'{"jsonrpc":"2.0","id":1,"method":"ping"}\x00', 1, -32700),
                (surrogate, 2, -32600),
                (b'{"id":"x","hello":1}', "x", -32600),
                (b'[{"jsonrpc":"2.0","id":4,"method":"ping"}]', None, -32600),
            ]
            for line, request, code in cases:
                answer = said(line)
                assert answer["jsonrpc"] == "2.0" and answer["id"] == request, answer
                assert answer["error"]["code"] == code, answer
            assert said(b'{"jsonrpc":"2.0","id":3,"method":"ping"}') == {
                "jsonrpc": "2.0", "id": 3, "result": {}
            }  # fmt: skip
        finally:
            server.stdin.close()
            assert server.wait(timeout=60) == 0


def test_dot_ids_through_the_sdk_are_invalid(tmp_path: Path) -> None:
    """`atommem mcp` in front of a server (through the SDK): a '.' or '..' id is refused as
    `invalid` before any request, where the SDK's own refusal was a bug's traceback."""
    env = {k: v for k, v in os.environ.items() if k not in ELSEWHERE}
    env |= {"ATOMMEM_API__URL": "http://127.0.0.1:9", "ATOMMEM_API__KEY": "amk_test"}
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "cli", "mcp"], env=env, cwd=ROOT
    )
    with (tmp_path / "server.log").open("w") as log, connected(stdio_client(params, log)) as tools:
        for dots in (".", ".."):
            said = tools.error("fact_history", space="demo", fact_id=dots)
            assert "invalid: " in said and "cannot be an id" in said, said
            said = tools.error("erase_session", space=dots, session_id="s1")
            assert "invalid: " in said and "cannot be an id" in said, said
        # an id that is one: the request goes out, and finds no server
        assert "unavailable" in tools.error("fact_history", space="demo", fact_id="f1")


def test_yesterday_is_read_in_the_sessions_own_offset(served: tuple[Tools, Any]) -> None:
    """23:30 on 10 March in New York is 04:30 on 11 March in UTC: "yesterday" is 9 March."""
    tools, _ = served
    tools.ok("create_space", name="dates")
    at = "2024-03-10T23:30:00-05:00"
    chat = {
        "space": "dates",
        "messages": [
            {
                "role": "user",
                "name": "Tom",
                "content": "Yesterday I hiked up Bear Mountain with my brother.",
                "created_at": at,
            },
            {
                "role": "user",
                "name": "Priya",
                "content": "Today I finally finished painting the kitchen.",
                "created_at": at,
            },
        ],
    }
    assert tools.ok("add_messages", **chat, wait=True)["items"][0]["state"] == "done"
    texts = [f["text"] for f in tools.ok("list_facts", space="dates")["items"]]
    hiked = [t for t in texts if "Bear Mountain" in t]
    painted = [t for t in texts if "kitchen" in t]
    assert hiked and all("9 March 2024" in t for t in hiked), texts
    assert painted and all("10 March 2024" in t for t in painted), texts
