"""`atommem space push` and `space pull` as a user runs them: a space ingested from the bundled
sample is copied between Edge directories (and to and from a Qdrant server when
ATOMMEM_TEST_QDRANT_URL names one) and arrives point for point, answering the same."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from common.settings import StoreSettings, get_settings
from common.store.base import Kind, Point, Store
from common.store.edge import EdgeStore
from common.store.qdrant import QdrantStore
from tests.helpers.cli import run
from tests.helpers.samples import SAMPLE

pytestmark = pytest.mark.integration

TENANT = "default"
QUESTION = "When did Tom adopt a puppy?"
SERVER_ENV = "ATOMMEM_TEST_QDRANT_URL"
PREFIX = "atommem_test"  # collections of their own on a shared server


def edge(data: Path) -> EdgeStore:
    return EdgeStore(data / "qdrant", get_settings().embedding.dimension)


def snapshot(
    store: Store, tenant: str = TENANT, space: str = "demo"
) -> dict[Kind, dict[str, Point]]:
    """Every point of the space, by kind and id, with vectors."""
    return {
        kind: {p.id: p for p in store.scroll(kind, tenant, space, with_vectors=True)}
        for kind in Kind
    }


def assert_same(
    a: dict[Kind, dict[str, Point]], b: dict[Kind, dict[str, Point]], exact: bool = True
) -> None:
    for kind in Kind:
        assert a[kind].keys() == b[kind].keys(), kind
        for point_id, point in a[kind].items():
            other = b[kind][point_id]
            assert point.payload == other.payload, (kind, point_id)
            if point.vector is None:
                assert other.vector is None, (kind, point_id)
                continue
            assert other.vector is not None, (kind, point_id)
            if exact:
                assert np.array_equal(point.vector, other.vector), (kind, point_id)
            else:  # a server stores float32 too, but may renormalise a cosine vector
                np.testing.assert_allclose(point.vector, other.vector, atol=1e-6)


def search(data: Path) -> list[dict[str, object]]:
    out = run(data, "search", "--space", "demo", "--json", QUESTION)
    assert out.returncode == 0, out.stderr
    hits: list[dict[str, object]] = json.loads(out.stdout)["hits"]
    return hits


def assert_clean_error(out: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr
    assert out.stderr.startswith("error: "), out.stderr
    for needle in needles:
        assert needle in out.stderr, out.stderr


@pytest.fixture(scope="module")
def first(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory holding the sample conversation in space `demo`."""
    data = tmp_path_factory.mktemp("first")
    assert run(data, "space", "create", "demo").returncode == 0
    ingested = run(data, "ingest", str(SAMPLE))
    assert ingested.returncode == 0, ingested.stderr
    return data


def test_push_and_pull_between_edge_directories(first: Path, tmp_path: Path) -> None:
    second, third = tmp_path / "second", tmp_path / "third"
    pushed = run(first, "space", "push", "demo", "--to", str(second))
    assert pushed.returncode == 0, pushed.stderr
    assert "copied space 'demo'" in pushed.stdout and "4 sessions" in pushed.stdout

    source, copy = edge(first), edge(second)
    try:
        original = snapshot(source)
        assert_same(original, snapshot(copy))
    finally:
        source.close()
        copy.close()
    assert len(original[Kind.FACTS]) > 15 and len(original[Kind.SPACES]) == 1
    assert search(second) == search(first)

    pulled = run(third, "space", "pull", "demo", "--from", str(second))
    assert pulled.returncode == 0, pulled.stderr
    back = edge(third)
    try:
        assert_same(original, snapshot(back))
    finally:
        back.close()

    # the target holds the space now: refused, then replaced on request
    assert_clean_error(
        run(first, "space", "push", "demo", "--to", str(second)), "already exists", "--replace"
    )
    replaced = run(first, "space", "push", "demo", "--to", str(second), "--replace")
    assert replaced.returncode == 0, replaced.stderr
    assert "replaced space 'demo'" in replaced.stdout

    assert_clean_error(
        run(first, "space", "push", "nope", "--to", str(second)), "space 'nope' does not exist"
    )
    assert_clean_error(run(first, "space", "push", "demo", "--to", str(first)), "same store")


def test_an_interrupted_copy_is_completed_by_running_it_again(first: Path, tmp_path: Path) -> None:
    second = tmp_path / "second"
    assert run(first, "space", "push", "demo", "--to", str(second)).returncode == 0
    # what an interruption leaves: some points, no space record (it is written last)
    target = edge(second)
    try:
        space_id = next(iter(snapshot(target)[Kind.SPACES]))
        target.delete(Kind.SPACES, TENANT, "demo", [space_id])
        facts = [p.id for p in target.scroll(Kind.FACTS, TENANT, "demo")]
        target.delete(Kind.FACTS, TENANT, "demo", facts[: len(facts) // 2])
        target.delete_scope(Kind.PROFILES, TENANT, "demo")
    finally:
        target.close()
    assert_clean_error(run(second, "stats", "--space", "demo"), "does not exist")

    again = run(first, "space", "push", "demo", "--to", str(second))
    assert again.returncode == 0, again.stderr
    assert "an interrupted copy left" in again.stderr
    source, copy = edge(first), edge(second)
    try:
        assert_same(snapshot(source), snapshot(copy))
    finally:
        source.close()
        copy.close()


def test_refuses_unfinished_sessions_and_a_busy_store(first: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    assert run(work, "space", "pull", "demo", "--from", str(first)).returncode == 0
    store = edge(work)
    try:
        session = next(store.scroll(Kind.SESSIONS, TENANT, "demo"))
        store.upsert(Kind.SESSIONS, [Point(session.id, {**session.payload, "status": "committed"})])
    finally:
        store.close()
    assert_clean_error(
        run(work, "space", "push", "demo", "--to", str(tmp_path / "out")),
        "1 unfinished sessions",
        "(committed)",
    )

    held = edge(first)
    held.count(Kind.SPACES, TENANT, None)  # opens it: this process owns the store now
    try:
        assert_clean_error(
            run(first, "space", "push", "demo", "--to", str(tmp_path / "out")),
            "open in another process",
        )
    finally:
        held.close()


@pytest.fixture
def server() -> Iterator[tuple[str, dict[str, str], str]]:
    """The test server's URL, the environment that names it, and a tenant of this test alone."""
    url = os.environ.get(SERVER_ENV)
    if not url:
        pytest.skip(f"no Qdrant server: set {SERVER_ENV}")
    tenant = f"push-{uuid.uuid4().hex[:12]}"
    env = {**os.environ, "ATOMMEM_STORE__COLLECTION_PREFIX": PREFIX}
    yield url, env, tenant
    settings = StoreSettings(qdrant_url=url, collection_prefix=PREFIX)
    store = QdrantStore(settings, get_settings().embedding.dimension)
    try:
        for kind in Kind:
            store.delete_scope(kind, tenant, "demo")
    finally:
        store.close()


def test_push_to_a_server_and_pull_back(
    tmp_path: Path, server: tuple[str, dict[str, str], str]
) -> None:
    url, env, tenant = server
    source, back = tmp_path / "source", tmp_path / "back"
    assert run(source, "--tenant", tenant, "space", "create", "demo", env=env).returncode == 0
    ingested = run(source, "--tenant", tenant, "ingest", str(SAMPLE), env=env)
    assert ingested.returncode == 0, ingested.stderr
    pushed = run(source, "--tenant", tenant, "space", "push", "demo", "--to", url, env=env)
    assert pushed.returncode == 0, pushed.stderr
    assert_clean_error(
        run(source, "--tenant", tenant, "space", "push", "demo", "--to", url, env=env),
        "already exists",
    )
    pulled = run(back, "--tenant", tenant, "space", "pull", "demo", "--from", url, env=env)
    assert pulled.returncode == 0, pulled.stderr

    settings = StoreSettings(qdrant_url=url, collection_prefix=PREFIX)
    remote = QdrantStore(settings, get_settings().embedding.dimension)
    original, copy = edge(source), edge(back)
    try:
        expected = snapshot(original, tenant)
        assert_same(expected, snapshot(remote, tenant), exact=False)
        assert_same(expected, snapshot(copy, tenant), exact=False)
    finally:
        remote.close()
        original.close()
        copy.close()
