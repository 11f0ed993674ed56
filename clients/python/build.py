"""Build `atommem-client`: the Python SDK as its own small distribution.

    python clients/python/build.py dist/atommem-client
    pip install dist/atommem-client        # then: from atommem_client import AtomMem

The SDK (`api/client.py`) and the models its replies are made of (`common/models/`, with
`common/errors.py`) are copied under one package, `atommem_client`, their imports of the
server's layout rewritten to it. The distribution needs httpx and pydantic only: no Celery,
no torch, and no top-level package but its own, so a user project with its own `common` or
`api` module keeps them. The server's layout stays as it is; this is the one place that maps
it onto the client's, and the build refuses a source file that imports anything of the
server beyond what it copies.
"""

from __future__ import annotations

import argparse
import re
import shutil
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "atommem_client"
# The modules of the server's layout the package copies: the SDK and what it imports, each
# module found by following `from common.models...` and `from common.errors` from the SDK.
ENTRY = "api/client.py"
MODEL_IMPORT = re.compile(
    r"^[ \t]*from common\.models(?:\.(\w+))? import \(?([\w, ]*)|^[ \t]*from common\.(errors) ",
    re.M,
)


def sources() -> dict[str, str]:
    """Each source file (under ROOT) and its module under the package."""
    found = {ENTRY: "client.py", "common/models/__init__.py": "models/__init__.py"}
    todo = [ENTRY]
    while todo:
        text = (ROOT / todo.pop()).read_text(encoding="utf-8")
        for module, names, errors in MODEL_IMPORT.findall(text):
            if errors:
                wanted = ["common/errors.py"]
            elif module:
                wanted = [f"common/models/{module}.py"]
            else:  # from common.models import ids, ...
                wanted = [f"common/models/{n.strip()}.py" for n in names.split(",") if n.strip()]
            for source in wanted:
                if source not in found:
                    found[source] = source.removeprefix("common/")
                    todo.append(source)
    return found


REWRITES = (
    (re.compile(r"^([ \t]*)(from|import) common\.models\b", re.M), rf"\1\2 {PACKAGE}.models"),
    (re.compile(r"^([ \t]*)(from|import) common\.errors\b", re.M), rf"\1\2 {PACKAGE}.errors"),
    (re.compile(r"^([ \t]*)from api\.client import", re.M), rf"\1from {PACKAGE} import"),
)
SERVER_IMPORT = re.compile(r"^[ \t]*(from|import) (common|api|workers|cli|bench)\b", re.M)
INIT = f'''"""AtomMem's Python SDK: `AtomMem` (blocking) and `AsyncAtomMem`, with the models of its
replies. Built from the AtomMem repository by clients/python/build.py."""

from {PACKAGE}.client import (
    ApiError,
    AsyncAtomMem,
    AtomMem,
    ConflictError,
    InvalidError,
    NotFoundError,
    RateLimited,
    Unavailable,
)
from {PACKAGE}.models.api import SearchFilters
from {PACKAGE}.models.messages import ChatMessage

__all__ = [
    "ApiError",
    "AsyncAtomMem",
    "AtomMem",
    "ChatMessage",
    "ConflictError",
    "InvalidError",
    "NotFoundError",
    "RateLimited",
    "SearchFilters",
    "Unavailable",
]
'''


def version() -> str:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return str(project["version"])


def pyproject() -> str:
    return f"""[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "atommem-client"
version = "{version()}"
description = "The Python SDK of AtomMem, long-term memory for LLM agents"
requires-python = ">=3.11"
dependencies = ["httpx>=0.27", "pydantic>=2.7"]

[tool.setuptools.packages.find]
where = ["src"]
include = ["{PACKAGE}*"]
"""


def rewritten(source: str, text: str) -> str:
    for pattern, replacement in REWRITES:
        text = pattern.sub(replacement, text)
    left = SERVER_IMPORT.search(text)
    if left is not None:
        line = text[left.start() : text.index("\n", left.start())].strip()
        raise SystemExit(f"{source}: imports the server beyond the SDK's models: {line!r}")
    return text


def build(out: Path) -> Path:
    """The distribution's source tree at `out` (replaced if present)."""
    if out.exists():
        shutil.rmtree(out)
    package = out / "src" / PACKAGE
    (package / "models").mkdir(parents=True)
    for source, target in sources().items():
        text = (ROOT / source).read_text(encoding="utf-8")
        (package / target).write_text(rewritten(source, text), encoding="utf-8")
    (package / "__init__.py").write_text(INIT, encoding="utf-8")
    (package / "py.typed").write_text("", encoding="utf-8")
    (out / "pyproject.toml").write_text(pyproject(), encoding="utf-8")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("out", type=Path, help="where the distribution's source tree goes")
    args = parser.parse_args(argv)
    print(build(args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
