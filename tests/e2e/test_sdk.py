"""The Python SDK (sync and async) and a schemathesis run against the served OpenAPI spec."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from datetime import date
from pathlib import Path

import pytest

from api.client import AsyncAtomMem, AtomMem, ConflictError, InvalidError, NotFoundError
from common.models.memory import Fact, Profile
from common.models.session import SessionInput
from tests.helpers.samples import sample_sessions
from tests.helpers.stack import ADMIN_KEY, Stack

pytestmark = pytest.mark.integration
SCHEMATHESIS = Path(__file__).with_name("schemathesis.toml")


def _key(stack: Stack, tenant: str) -> str:
    with stack.admin() as admin:
        admin.post("/v1/admin/tenants", json={"name": tenant})
        return str(admin.post(f"/v1/admin/tenants/{tenant}/keys").json()["api_key"])


def test_sync_client_verbs(stack: Stack) -> None:
    with AtomMem(stack.url, _key(stack, "sync")) as mem:
        mem.create_space("notes")
        with pytest.raises(ConflictError):
            mem.create_space("notes")
        first, second = sample_sessions()[:2]
        jobs = [mem.add("notes", first), mem.add("notes", SessionInput.model_validate(second))]
        done = mem.wait([j.job_id for j in jobs], timeout=300, poll=0.2)
        assert [j.state for j in done] == ["done", "done"]
        assert [s.session_id for s in mem.sessions("notes")] == ["s1", "s2"]
        assert [t.id for t in mem.session("notes", "s1").turns] == [t["id"] for t in first["turns"]]
        assert {j.job_id for j in mem.jobs("notes")} == {j.job_id for j in jobs}
        explained = mem.search("notes", "Where does Priya work?", explain=True)
        assert explained.graph is not None and explained.graph.nodes
        facts = mem.get_all("notes")
        assert all(isinstance(f, Fact) for f in facts)
        assert len(facts) == mem.get_space("notes").counts.facts > 5
        fact = mem.get("notes", facts[0].id)
        assert fact == facts[0]
        history = mem.history("notes", fact.id)
        assert history.current == fact.text and history.provenance[0] == fact.source
        events = mem.get_all("notes", "events")
        assert events and mem.get("notes", events[0].id, "events") == events[0]
        hits = mem.search("notes", "When did Tom adopt a puppy?", k=3, min_score=0.0).hits
        assert len(hits) == 3 and "beagle" in hits[0].text
        assert all(
            h.relevance >= 0.28 for h in mem.search("notes", "When did Tom adopt a puppy?").hits
        )
        assert mem.ask("notes", "Where does Priya live?").answer
        may = mem.profiles("notes", person="Priya", as_of=date(2024, 5, 1))
        assert may and all(p.person == "Priya" and p.t_from <= date(2024, 5, 1) for p in may)
        assert any("Boston" in p.content for p in may)
        assert not any("Denver" in p.content for p in may)
        assert {p.id for p in may} <= {p.id for p in mem.profiles("notes", person="Priya")}
        erased = mem.delete("notes", fact_id=fact.id).erased
        assert erased.facts_deleted == [fact.id]
        with pytest.raises(NotFoundError):
            mem.get("notes", fact.id)
        with pytest.raises(InvalidError):
            mem.add("notes", {**first, "turns": []})
        assert mem.delete("notes", session_id="s2").erased.sessions_deleted == ["s2"]
        assert [s.name for s in mem.list_spaces()] == ["notes"]
        assert "s1" in mem.delete_space("notes").erased.sessions_deleted
        assert mem.list_spaces() == []


def test_async_client_verbs(stack: Stack) -> None:
    async def run() -> None:
        async with AsyncAtomMem(stack.url, _key(stack, "async")) as mem:
            await mem.create_space("notes")
            job = await mem.add("notes", sample_sessions()[0])
            (done,) = await mem.wait(job.job_id, timeout=300, poll=0.2)
            assert done.state == "done"
            searches = await asyncio.gather(
                *(mem.search("notes", q) for q in ("Tom's puppy", "Priya's pottery class"))
            )
            assert all(s.hits for s in searches)
            facts = await mem.get_all("notes")
            assert await mem.get("notes", facts[0].id) == facts[0]
            profiles = await mem.get_all("notes", "profiles")
            assert all(isinstance(p, Profile) for p in profiles)
            with pytest.raises(NotFoundError):
                await mem.get_space("missing")

    asyncio.run(run())


def test_schemathesis_finds_no_failure_with_every_check(stack: Stack, tmp_path: Path) -> None:
    """Every operation of the served spec, with a tenant's key and with the admin key, under
    every check (status codes, error bodies, schemas, headers, positive and negative data);
    a few cases each here, thousands in the run docs/http-api.md gives."""
    key = _key(stack, "fuzz")
    with AtomMem(stack.url, key) as mem:
        mem.create_space("alice")
        mem.search("alice", "warm up")  # the worker loads its embedding model once
    for header in (f"Authorization: Bearer {key}", f"Authorization: Bearer {ADMIN_KEY}"):
        out = subprocess.run(
            [sys.executable, "-m", "schemathesis.cli", "--config-file", str(SCHEMATHESIS),
             "run", f"{stack.url}/openapi.json", "--checks", "all", "-H", header, "-n", "10",
             "--request-timeout", "60", "--seed", "1", "--no-color"],
            capture_output=True, text=True, cwd=tmp_path, timeout=900, check=False,
        )  # fmt: skip
        assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-2000:]
        assert " passed" in out.stdout


def test_the_cli_runs_against_a_server(stack: Stack) -> None:
    env = {
        **{k: v for k, v in stack.env.items() if not k.startswith("ATOMMEM_BROKER")},
        "ATOMMEM_API__URL": stack.url,
        "ATOMMEM_API__KEY": _key(stack, "cli"),
    }
    sample = Path(__file__).resolve().parents[2] / "cli" / "samples" / "sample_conversation.json"

    def atommem(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "cli", *args],
            capture_output=True, text=True, env=env, timeout=600, check=False,
        )  # fmt: skip

    ingest = atommem("ingest", "--create-space", str(sample))
    assert ingest.returncode == 0, ingest.stderr
    assert "total: 4 sessions (0 unchanged)" in ingest.stdout
    found = atommem("search", "--space", "demo", "--json", "When did Tom adopt a puppy?")
    assert found.returncode == 0 and "beagle" in found.stdout
    erased = atommem("delete", "--space", "demo", "--everything")
    assert erased.returncode == 0 and '"sessions_deleted"' in erased.stdout
    refused = atommem("demo")
    assert refused.returncode == 2 and "unset ATOMMEM_API__URL" in refused.stderr
