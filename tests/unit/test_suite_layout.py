"""The test suite's own layout: each module on the shared Redis owns its database, the numbers
come from one table, and shared code lives in tests/helpers (never a conftest or a test module
imported as a library)."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import pytest

from tests.helpers.redis import DATABASES, SHARED

TESTS = Path(__file__).resolve().parents[1]
TABLE = TESTS / "helpers" / "redis.py"
HOST, PORT = SHARED
# A URL of the shared Redis that names a database (host 127.0.0.1 or localhost, port 6379).
SHARED_URL = re.compile(rf"redis://(?:{re.escape(HOST)}|localhost)(?::{PORT})?/(\d+)")
# Scripts that share code with the tests but are run by hand (`python -m tests.browser.shoot`).
SCRIPTS = {"tests/browser/shoot.py", "tests/browser/at_size.py"}


def _modules() -> dict[str, Path]:
    """Every Python file of the suite by its dotted name."""
    found = {}
    for path in sorted(TESTS.rglob("*.py")):
        parts = path.relative_to(TESTS.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _table(source: str) -> list[tuple[str, int]]:
    """The (owner, database) entries of `DATABASES` as written, repeats included (a dict
    literal keeps only the last of two equal keys)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.AnnAssign | ast.Assign) and isinstance(node.value, ast.Dict):
            targets = [node.target] if isinstance(node, ast.AnnAssign) else node.targets
            if any(isinstance(t, ast.Name) and t.id == "DATABASES" for t in targets):
                return [
                    (ast.literal_eval(k), ast.literal_eval(v))
                    for k, v in zip(node.value.keys, node.value.values, strict=True)
                    if k is not None
                ]
    raise AssertionError("no DATABASES table")


def _shared_urls(modules: dict[str, Path]) -> list[tuple[str, int]]:
    """(module, database) for each shared-Redis URL written out in a module's source."""
    return [
        (name, int(db))
        for name, path in modules.items()
        for db in SHARED_URL.findall(path.read_text(encoding="utf-8"))
    ]


def _problems(table: list[tuple[str, int]], written: list[tuple[str, int]]) -> list[str]:
    """What is wrong with the databases the table gives and the URLs modules write out: a
    database two modules claim (`module:role` is its module's), an owner given twice, a
    database outside 1-15 (0 is the developer's own)."""
    owners: dict[int, set[str]] = defaultdict(set)
    for owner, db in table + written:
        owners[db].add(owner.split(":", 1)[0])
    given = [owner for owner, _ in table]
    return [
        *(f"database {db} is claimed by {sorted(n)}" for db, n in owners.items() if len(n) > 1),
        *(f"{o} is given twice" for o in sorted(set(given)) if given.count(o) > 1),
        *(f"database {db} is not one of 1-15" for db in sorted(owners) if not 1 <= db <= 15),
    ]


def _imports(path: Path) -> list[str]:
    """Every module `path` imports, at any depth of its code; `from a import b` gives `a.b`."""
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            found.extend(f"{base}.{alias.name}".lstrip(".") for alias in node.names)
            found.append(base.lstrip("."))
    return [name for name in found if name]


def _not_a_library(module: str) -> bool:
    return any(part == "conftest" or part.startswith("test_") for part in module.split("."))


def test_no_two_modules_share_a_database_of_the_shared_redis() -> None:
    problems = _problems(_table(TABLE.read_text(encoding="utf-8")), _shared_urls(_modules()))
    assert not problems, "; ".join(problems)


def test_database_numbers_are_written_only_in_the_table() -> None:
    written = sorted({name for name, _ in _shared_urls(_modules())})
    assert not written, (
        f"shared-Redis URLs written out (use tests.helpers.redis.shared_url): {written}"
    )


def test_every_owner_in_the_table_is_a_module_of_the_suite() -> None:
    modules = _modules()
    stale = sorted(o for o in DATABASES if o.split(":", 1)[0] not in modules)
    assert not stale, f"DATABASES names modules that do not exist: {stale}"


def test_no_module_imports_a_conftest_or_a_test_module() -> None:
    imported = {
        name: {m for m in _imports(path) if _not_a_library(m)} for name, path in _modules().items()
    }
    bad = {name: sorted(found) for name, found in imported.items() if found}
    assert not bad, f"imports of a conftest or a test module (move it to tests/helpers): {bad}"


def test_shared_code_lives_in_tests_helpers() -> None:
    stray = sorted(
        str(path.relative_to(TESTS.parent))
        for path in _modules().values()
        if not (path.name.startswith("test_") or path.name in ("conftest.py", "__init__.py"))
        and path.parent.name != "helpers"
        and str(path.relative_to(TESTS.parent)) not in SCRIPTS
    )
    assert not stray, f"support modules outside tests/helpers: {stray}"


@pytest.mark.parametrize(
    ("rule", "home", "pattern"),
    [
        (
            "skip here, fail under CI",
            "tests/helpers/skips.py",
            r"environ(?:\.get\(|\[)\s*[\"']CI[\"']",
        ),
        ("a free loopback port", "tests/helpers/ports.py", r"\.bind\(\s*\(\s*[\"']127\.0\.0\.1"),
    ],
    ids=["skip-or-fail", "free-port"],
)
def test_each_rule_is_written_once(rule: str, home: str, pattern: str) -> None:
    written = sorted(
        str(path.relative_to(TESTS.parent))
        for path in _modules().values()
        if re.search(pattern, path.read_text(encoding="utf-8"))
    )
    assert written == [home], f"{rule}: written in {written}, not only in {home}"


@pytest.mark.parametrize(
    ("source", "written", "problems"),
    [
        ('DATABASES = {"tests.a": 3, "tests.b": 4}', [], []),
        ('DATABASES = {"tests.a": 3, "tests.b": 3}', [], ["database 3 is claimed by"]),
        ('DATABASES = {"tests.a": 3, "tests.a": 4}', [], ["tests.a is given twice"]),
        ('DATABASES = {"tests.a": 3}', [("tests.b", 3)], ["database 3 is claimed by"]),
        ('DATABASES = {"tests.a": 3, "tests.a:other": 4}', [("tests.a", 3)], []),
        ('DATABASES = {"tests.a": 0}', [], ["database 0 is not one of 1-15"]),
    ],
)
def test_the_database_check_fails_on_a_shared_number(
    source: str, written: list[tuple[str, int]], problems: list[str]
) -> None:
    """The table is read as written: a dict literal would keep only the last of two equal
    keys, and the check would pass on the table that repeats one."""
    found = _problems(_table(source), written)
    assert len(found) == len(problems)
    assert all(f.startswith(p) for f, p in zip(found, problems, strict=True)), found


def test_the_import_check_sees_every_way_to_import_a_test_module(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from tests.e2e.conftest import Stack\n"
        "from tests.unit import test_health\n"
        "def f():\n    import tests.integration.test_workers\n"
        "from .conftest import x\n"
        "from tests.helpers.stack import running_stack\n"
    )
    assert sorted(m for m in _imports(probe) if _not_a_library(m)) == [
        "conftest",
        "conftest.x",
        "tests.e2e.conftest",
        "tests.e2e.conftest.Stack",
        "tests.integration.test_workers",
        "tests.unit.test_health",
    ]
