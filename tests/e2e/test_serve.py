"""`atommem serve`: one process, no Redis, driven through the SDK as a chat product would."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from api.client import AtomMem, InvalidError
from tests.helpers.serve import serving
from workers.launch import ROOT

pytestmark = pytest.mark.integration

CHAT = [
    {"role": "system", "content": "You are a friendly assistant."},
    {
        "role": "user",
        "content": "I moved to Denver last month.",
        "created_at": "2024-06-02T10:00:00Z",
    },
    {"role": "assistant", "content": "How do you like Denver?"},
    {"role": "user", "content": "I love it, and I adopted a grey cat named Mochi."},
]


def quick_start() -> tuple[str, str]:
    """The README quick start's shell block and Python block."""
    readme = (Path(ROOT) / "README.md").read_text(encoding="utf-8")
    block = readme.split("<!-- quick-start")[1].split("<!-- /quick-start -->")[0]
    shell = block.split("```bash\n")[1].split("```")[0]
    python = block.split("```python\n")[1].split("```")[0]
    return shell, python


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("serve") / "data"


def test_a_chat_goes_in_as_plain_messages_and_is_answered(data: Path) -> None:
    with serving(data) as served:
        assert stat.S_IMODE(served.key_file.stat().st_mode) == 0o600
        assert served.key() in served.log.read_text()  # shown on the first start
        ready = httpx.get(f"{served.url}/readyz", params={"deep": "true"}).json()
        assert ready == {"status": "ready", "worker": True, "store": True, "waiting": True}
        with AtomMem(served.url, served.key()) as mem:
            mem.create_space("priya")
            jobs = mem.add_messages("priya", CHAT, conversation_id="chat-1", user="Priya")
            assert len(jobs) == 1 and jobs[0].session_id.startswith("chat-1-")
            again = mem.add_messages("priya", CHAT, conversation_id="chat-1", user="Priya")
            assert [j.job_id for j in again] == [j.job_id for j in jobs]
            (done,) = mem.wait([jobs[0].job_id], timeout=300)
            assert done.state == "done" and done.counts["facts_stored"] >= 2
            stored = mem.session("priya", jobs[0].session_id)
            assert [t.speaker for t in stored.turns] == ["Priya", "Assistant", "Priya"]
            hits = mem.search("priya", "What is the name of Priya's cat?").hits
            assert "Mochi" in hits[0].text
            block = mem.context("priya", "Where does Priya live?", max_tokens=200)
            assert block.tokens <= 200 and "Denver" in block.text
            cited = {i.label: i for i in block.items}
            assert any(
                i.kind == "fact" and "Denver" in i.text and i.session_id == jobs[0].session_id
                for i in cited.values()
            )
            assert all(f"[{label}]" in block.text for label in cited)
            # nothing about the question in memory: nothing comes back by default
            assert mem.search("priya", "How do I reset my router's password?").hits == []
            # no time given: the same messages sent later are still the same job
            timeless = [{"role": "user", "content": "My favourite food is ramen."}]
            first = mem.add_messages("priya", timeless, user="Priya")
            (later,) = mem.add_messages("priya", timeless, user="Priya")
            assert [later.job_id] == [j.job_id for j in first]
            with pytest.raises(InvalidError) as refused:
                mem.add_messages("priya", [{"rol": "user", "content": "x"}, {"role": "bot"}])
            for error in ("body.messages.0.role: Field required",
                          "body.messages.0.rol: Extra inputs are not permitted",
                          "body.messages.1.content: Field required"):  # fmt: skip
                assert error in refused.value.detail


def test_a_restart_keeps_the_key_and_the_memory(data: Path) -> None:
    with serving(data) as served:
        assert str(served.key_file) in served.log.read_text().split("AtomMem at")[-1]
        with AtomMem(served.url, served.key()) as mem:
            assert mem.get_space("priya").counts.facts >= 3
            assert "Mochi" in mem.search("priya", "Priya's cat").hits[0].text


def test_the_readme_quick_start_runs_as_written(tmp_path: Path) -> None:
    shell, python = quick_start()
    assert "atommem serve" in shell and "pip install" in shell  # installed here already
    with serving(tmp_path / ".atommem", cwd=tmp_path) as served:
        code = python.replace("http://127.0.0.1:8080", served.url)
        ran = subprocess.run(
            [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
            timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)},
        )  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-3000:]
    block, answer = ran.stdout.rsplit("\n", 2)[0], ran.stdout.strip().splitlines()[-1]
    assert "Denver" in block and "[F1]" in block
    assert "Mochi" in answer


def test_a_chat_accepted_before_a_kill_is_remembered_after_the_restart(tmp_path: Path) -> None:
    """SIGKILL right after the 202: the job is in the journal on disk, and the next start
    sends it again (nothing lost, nothing done twice)."""
    data = tmp_path / "data"
    chat = [{"role": "user", "content": f"On day {i} I walked my dog Pepper to the lake."}
            for i in range(40)]  # fmt: skip
    with serving(data) as served:
        with AtomMem(served.url, served.key()) as mem:
            mem.create_space("kim")
            (job,) = mem.add_messages("kim", chat, conversation_id="walks", user="Kim")
        served.proc.kill()
        served.proc.wait(30)
    with serving(data) as served:
        assert "resuming" in served.log.read_text().split("AtomMem at")[-2]
        with AtomMem(served.url, served.key()) as mem:
            (done,) = mem.wait([job.job_id], timeout=300)
            assert done.state == "done" and done.counts["facts_stored"] >= 1
            assert [s.session_id for s in mem.sessions("kim")] == [job.session_id]
            assert "Pepper" in mem.context("kim", "What is the name of Kim's dog?").text
