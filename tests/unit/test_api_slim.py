"""The API is a thin producer: it imports, and builds its app, where the worker stack is absent."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.helpers.redis import unreachable_url

ROOT = Path(__file__).resolve().parents[2]

# What only workers need: the embedding model and its torch, the store client, the numeric
# stack and the LLM client. In the child process importing any of them raises ImportError.
WORKER_ONLY = ("torch", "sentence_transformers", "transformers", "qdrant_client", "numpy", "scipy")

CHILD = f"""
import importlib.abc, sys

class Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {WORKER_ONLY!r}:
            raise ImportError(f"{{name}} is not installed here")
        return None

sys.meta_path.insert(0, Absent())
import api.main
from common.settings import Settings

app = api.main.create_app(Settings(broker={{"url": {unreachable_url()!r}}}))
assert app.openapi()["paths"], "no routes"
loaded = [m for m in sys.modules if m.split(".")[0] == "workers" or m.startswith("common.memory")]
assert not loaded, loaded
print("ok")
"""


def test_the_api_imports_and_builds_without_the_worker_stack() -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHILD], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_the_blocker_really_blocks() -> None:
    """The check above means something only if a blocked import fails in the child."""
    probe = CHILD.replace("import api.main", "import numpy", 1)
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode != 0
    assert "numpy is not installed here" in done.stderr
