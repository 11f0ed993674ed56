"""The framework adapters against `atommem serve`, each driven by the real library: a LangGraph
graph whose nodes put and search through `AtomMemStore`, and an OpenAI Agents SDK agent (the
SDK's own scripted model, no network) that remembers and recalls through `memory_tools`, its
conversation then sent with `remember_conversation`."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any, TypedDict

import pytest
from agents import Agent, RunConfig, Runner
from agents.testing import ScriptedModel, assistant_message, function_call
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore

from api.adapters.langgraph import AtomMemStore
from api.adapters.openai_agents import memory_tools, remember_conversation
from api.client import AtomMem
from tests.helpers.serve import Served, serving

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serving(tmp_path_factory.mktemp("adapters") / "data") as served:
        yield served


@pytest.fixture
def mem(served: Served) -> Iterator[AtomMem]:
    with AtomMem(served.url, served.key()) as mem:
        yield mem


class Chat(TypedDict):
    user: str
    said: str
    question: str
    recalled: list[str]


def _remember(state: Chat, *, store: BaseStore) -> dict[str, Any]:
    store.put(("users", state["user"]), "note-1", {"content": state["said"]})
    return {}


def _recall(state: Chat, *, store: BaseStore) -> dict[str, Any]:
    found = store.search(("users", state["user"]), query=state["question"], limit=3)
    return {"recalled": [item.value["content"] for item in found]}


def test_a_langgraph_graph_remembers_and_recalls_through_the_store(mem: AtomMem) -> None:
    builder = StateGraph(Chat)
    builder.add_node("remember", _remember)
    builder.add_node("recall", _recall)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "recall")
    builder.add_edge("recall", END)
    graph = builder.compile(store=AtomMemStore(mem, speaker="Priya"))
    said = "I adopted a grey cat named Mochi last spring."
    out = graph.invoke(
        {"user": "priya", "said": said, "question": "What is the name of Priya's cat?",
         "recalled": []}
    )  # fmt: skip
    assert out["recalled"] == [said]
    # the namespace is a space of AtomMem: its facts are there for every other door
    assert any("Mochi" in f.text for f in mem.get_all("users.priya"))


def test_the_store_gets_replaces_lists_and_deletes_items(mem: AtomMem) -> None:
    store = AtomMemStore(mem, speaker="Dev")
    ns = ("users", "dev", "notes")
    store.put(ns, "job", {"content": "I work as a nurse in Leeds."})
    item = store.get(ns, "job")
    assert item is not None and item.value == {"content": "I work as a nurse in Leeds.",
                                               "speaker": "Dev"}  # fmt: skip
    store.put(ns, "job", {"content": "I work as a nurse in Leeds."})  # the same: unchanged
    store.put(ns, "job", {"content": "I now teach chemistry in York.", "speaker": "Dev"})
    (hit,) = store.search(ns, query="What does Dev teach?")
    assert hit.key == "job" and hit.value["content"] == "I now teach chemistry in York."
    assert hit.score is not None and 0.28 <= hit.score <= 1.0
    assert any("chemistry" in f for f in hit.value["facts"])
    assert not any("nurse" in f.text for f in mem.get_all("users.dev.notes"))  # replaced
    store.put(ns, "pet", {"content": "My dog Rex loves the beach."})
    assert [i.key for i in store.search(ns)] == ["job", "pet"]  # no query: in order
    assert [i.key for i in store.search(ns, filter={"content": "My dog Rex loves the beach."})] == [
        "pet"
    ]
    assert ("users", "dev", "notes") in store.list_namespaces(prefix=("users",))
    assert store.list_namespaces(prefix=("users",), max_depth=2) >= [("users", "dev")]
    assert store.list_namespaces(suffix=("notes",)) == [("users", "dev", "notes")]
    assert store.list_namespaces(prefix=("users", "*", "notes")) == [("users", "dev", "notes")]
    store.delete(ns, "pet")
    assert store.get(ns, "pet") is None and store.get(("nowhere",), "pet") is None
    assert asyncio.run(store.aget(ns, "job")) == store.get(ns, "job")
    with pytest.raises(ValueError, match="keeps text"):
        store.put(ns, "bad", {"content": "x", "mood": "happy"})


def test_an_agent_remembers_and_recalls_with_the_memory_tools(mem: AtomMem) -> None:
    mem.create_space("sam")
    model = ScriptedModel(
        [
            [function_call("remember", {"statement": "I am allergic to peanuts."}, call_id="c1")],
            [function_call("recall", {"question": "What is Sam allergic to?"}, call_id="c2")],
            [assistant_message("You are allergic to peanuts [T1].")],
        ]
    )
    agent = Agent(name="helper", model=model, tools=memory_tools(mem, "sam", user="Sam"))
    result = Runner.run_sync(
        agent, "Note that I'm allergic to peanuts. What am I allergic to?",
        run_config=RunConfig(tracing_disabled=True),
    )  # fmt: skip
    assert result.final_output == "You are allergic to peanuts [T1]."
    assert model.remaining_steps == 0
    items: list[dict[str, Any]] = [dict(item) for item in result.to_input_list()]
    outputs = {
        str(item["call_id"]): str(item["output"])
        for item in items
        if item.get("type") == "function_call_output"
    }
    assert outputs["c1"].startswith("kept (job ")
    assert "peanuts" in outputs["c2"] and "[" in outputs["c2"]  # the block, labelled
    jobs = remember_conversation(mem, "sam", result.to_input_list(), user="Sam")
    assert len(jobs) == 1
    mem.wait([j.job_id for j in jobs])
    stored = mem.session("sam", jobs[0].session_id)
    assert [t.speaker for t in stored.turns] == ["Sam", "Assistant"]  # tool traffic left out
    assert "peanuts" in mem.context("sam", "What is Sam allergic to?").text
