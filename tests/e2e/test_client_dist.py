"""`atommem-client`, the SDK as its own distribution: built by clients/python/build.py,
installed into a fresh virtualenv (httpx and pydantic come from the index, nothing else), and
run beside a user's own module named `common` against `atommem serve`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.serve import Served, serving
from workers.launch import ROOT

pytestmark = pytest.mark.integration

APP = """
import json, sys
import common  # the user's own module, not AtomMem's
from atommem_client import AtomMem

assert common.MINE == "mine"
url, key = sys.argv[1], sys.argv[2]
with AtomMem(url, key) as mem:
    mem.create_space("ana")
    chat = [{"role": "user", "content": "I moved to Lisbon and I play the cello."}]
    mem.wait([job.job_id for job in mem.add_messages("ana", chat, user="Ana")])
    hits = mem.search("ana", "Which instrument does Ana play?").hits
    answer = mem.ask("ana", "Which instrument does Ana play?").answer
loaded = sorted({m.split(".")[0] for m in sys.modules})
print(json.dumps({"hits": [h.text for h in hits], "answer": answer, "loaded": loaded}))
"""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serving(tmp_path_factory.mktemp("client-dist") / "data") as served:
        yield served


def _run(argv: list[str], cwd: Path) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return done.stdout


def test_the_sdk_installs_alone_and_runs_beside_a_users_common_module(
    served: Served, tmp_path: Path
) -> None:
    dist = tmp_path / "atommem-client"
    _run([sys.executable, str(ROOT / "clients" / "python" / "build.py"), str(dist)], tmp_path)
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], tmp_path)
    python = str(venv / "bin" / "python")
    _run([python, "-m", "pip", "install", "-q", str(dist)], tmp_path)
    installed = {
        p["name"].lower()
        for p in json.loads(_run([python, "-m", "pip", "list", "--format", "json"], tmp_path))
    }
    assert "atommem-client" in installed and {"httpx", "pydantic"} <= installed
    assert not installed & {"atommem", "celery", "redis", "torch", "numpy", "kombu"}

    user = tmp_path / "project"
    user.mkdir()
    (user / "common.py").write_text('MINE = "mine"\n')
    (user / "app.py").write_text(APP)
    out = json.loads(_run([python, "app.py", served.url, served.key()], user).splitlines()[-1])
    assert any("cello" in h for h in out["hits"]) and "cello" in out["answer"]
    assert not set(out["loaded"]) & {"api", "workers", "celery", "torch"}
