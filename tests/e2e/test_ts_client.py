"""The TypeScript client (clients/typescript): its types generated from the running server's
`/openapi.json` are the ones committed, it compiles, and Node's test runner drives it against
`atommem serve`. Skipped without Node and npm, except in CI."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.serve import Served, serving
from tests.helpers.skips import unavailable
from workers.launch import ROOT

pytestmark = pytest.mark.integration
PACKAGE = Path(ROOT) / "clients" / "typescript"


def npm(*args: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        ["npm", *args], cwd=PACKAGE, capture_output=True, text=True, timeout=600,
        env={**os.environ, **(env or {})},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-3000:]
    return done.stdout


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    if not (shutil.which("node") and shutil.which("npm")):
        unavailable("no Node.js and npm on this machine (the TypeScript client's tests need them)")
    npm("ci", "--no-audit", "--no-fund")
    with serving(tmp_path_factory.mktemp("ts-client") / "data") as served:
        yield served


def test_the_committed_types_are_those_of_the_running_server(served: Served) -> None:
    committed = (PACKAGE / "src" / "schema.ts").read_text(encoding="utf-8")
    try:
        npm("run", "generate", env={"ATOMMEM_OPENAPI": f"{served.url}/openapi.json"})
        regenerated = (PACKAGE / "src" / "schema.ts").read_text(encoding="utf-8")
    finally:
        (PACKAGE / "src" / "schema.ts").write_text(committed, encoding="utf-8")
    assert regenerated == committed, "run `npm run generate` in clients/typescript"


def test_node_drives_the_client_against_atommem_serve(served: Served) -> None:
    npm("run", "build")
    out = npm("test", env={"ATOMMEM_URL": served.url, "ATOMMEM_KEY": served.key()})
    assert "# fail 0" in out and "# pass 2" in out
