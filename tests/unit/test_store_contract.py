"""The `Store` contract, one suite run on every backend: Qdrant Edge in a temporary directory,
and a Qdrant server when ATOMMEM_TEST_QDRANT_URL names one."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from common.settings import StoreSettings
from common.store.base import Kind, Point, Store
from common.store.edge import EdgeStore

PAGE = 3  # small, so that scrolling crosses several pages
DIM = 4
SERVER_ENV = "ATOMMEM_TEST_QDRANT_URL"

Opener = Callable[[], Store]


def rid(name: str) -> str:
    """A record id as the pipeline makes them (uuid5), which both backends accept."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"contract/{name}"))


def vec(*values: float) -> np.ndarray:
    v = np.asarray(values, dtype=np.float32)
    return v / np.linalg.norm(v)


def pt(
    name: str, tenant: str = "t", space: str = "s", vector: bool = True, **extra: object
) -> Point:
    payload = {"tenant": tenant, "space": space, "name": name, **extra}
    return Point(rid(name), payload, vec(1, 2, 3, len(name)) if vector else None)


def names(points: list[Point]) -> list[str]:
    return [p.payload["name"] for p in points]


@pytest.fixture(params=["edge", "server"])
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    """Opens the backend; each call gives a fresh handle on the same data."""
    opened: list[Store] = []
    if request.param == "edge":

        def open_edge() -> Store:
            store = EdgeStore(tmp_path / "store", DIM, scroll_page=PAGE)
            opened.append(store)
            return store

        yield open_edge
    else:
        url = os.environ.get(SERVER_ENV)
        if not url:
            pytest.skip("no Qdrant server: set ATOMMEM_TEST_QDRANT_URL to run the server variant")
        from common.store.qdrant import QdrantStore

        settings = StoreSettings(
            qdrant_url=url, collection_prefix=f"contract_{uuid.uuid4().hex[:12]}", scroll_page=PAGE
        )

        def open_server() -> Store:
            store = QdrantStore(settings, DIM)
            opened.append(store)
            return store

        yield open_server
        from qdrant_client import QdrantClient

        client = QdrantClient(url=url)
        for kind in Kind:
            client.delete_collection(f"{settings.collection_prefix}_{kind.value}")
        client.close()
    for store in opened:
        store.close()


@pytest.fixture
def store(opener: Opener) -> Store:
    return opener()


def test_upsert_reads_back_payload_and_vector_exactly(store: Store) -> None:
    nested = {"session_id": "s1", "turns": [1, 2]}
    wanted = vec(0.1, 0.2, 0.3, 0.4)
    point = Point(
        rid("a"),
        {"tenant": "t", "space": "s", "text": "Ann moved to Oslo.", "keywords": ["oslo"],
         "source": nested, "score": 0.25, "flag": None},
        wanted,
    )  # fmt: skip
    store.upsert(Kind.FACTS, [point])
    [got] = store.retrieve(Kind.FACTS, "t", "s", [point.id], with_vectors=True)
    assert got.id == point.id
    assert got.payload == point.payload
    assert got.vector is not None and got.vector.dtype == np.float32
    np.testing.assert_allclose(got.vector, wanted, rtol=0, atol=1e-6)
    [scrolled] = store.scroll(Kind.FACTS, "t", "s", with_vectors=True)
    assert scrolled.payload == point.payload and scrolled.vector is not None
    [bare] = store.retrieve(Kind.FACTS, "t", "s", [point.id])
    assert bare.vector is None


def test_upsert_replaces_a_point(store: Store) -> None:
    store.upsert(Kind.FACTS, [pt("a", text="old")])
    store.upsert(Kind.FACTS, [pt("a", text="new")])
    [got] = store.retrieve(Kind.FACTS, "t", "s", [rid("a")])
    assert got.payload["text"] == "new"
    assert store.count(Kind.FACTS, "t", "s") == 1


def test_write_of_mixed_kinds(store: Store) -> None:
    store.write(
        [
            (Kind.FACTS, pt("f1")),
            (Kind.EVENTS, pt("e1")),
            (Kind.FACTS, pt("f2")),
            (Kind.PROFILES, pt("p1", person="Ann")),
            (Kind.SESSIONS, pt("s1", vector=False)),
        ]
    )
    assert sorted(names(list(store.scroll(Kind.FACTS, "t", "s")))) == ["f1", "f2"]
    assert names(list(store.scroll(Kind.EVENTS, "t", "s"))) == ["e1"]
    assert names(list(store.scroll(Kind.PROFILES, "t", "s"))) == ["p1"]
    assert names(list(store.scroll(Kind.SESSIONS, "t", "s"))) == ["s1"]
    assert store.count(Kind.SPACES, "t", "s") == 0
    store.write([])


def test_one_record_id_in_two_kinds_does_not_collide(store: Store) -> None:
    shared = rid("same")
    store.upsert(
        Kind.FACTS, [Point(shared, {"tenant": "t", "space": "s", "k": "fact"}, vec(1, 0, 0, 0))]
    )
    store.upsert(
        Kind.EVENTS, [Point(shared, {"tenant": "t", "space": "s", "k": "event"}, vec(0, 1, 0, 0))]
    )
    [fact] = store.retrieve(Kind.FACTS, "t", "s", [shared], with_vectors=True)
    [event] = store.retrieve(Kind.EVENTS, "t", "s", [shared], with_vectors=True)
    assert (fact.id, fact.payload["k"]) == (shared, "fact")
    assert (event.id, event.payload["k"]) == (shared, "event")
    assert fact.vector is not None and fact.vector[0] == pytest.approx(1.0)
    store.delete(Kind.FACTS, "t", "s", [shared])
    assert store.retrieve(Kind.FACTS, "t", "s", [shared]) == []
    assert len(store.retrieve(Kind.EVENTS, "t", "s", [shared])) == 1


def _populate_scopes(store: Store) -> None:
    store.upsert(
        Kind.FACTS,
        [
            pt("mine1"), pt("mine2"),
            pt("other-space", space="s2"),
            pt("other-tenant", tenant="t2"),
            pt("other-both", tenant="t2", space="s2"),
        ],
    )  # fmt: skip


def test_tenant_and_space_isolation_on_reads(store: Store) -> None:
    _populate_scopes(store)
    assert sorted(names(list(store.scroll(Kind.FACTS, "t", "s")))) == ["mine1", "mine2"]
    assert sorted(names(list(store.scroll(Kind.FACTS, "t", None)))) == [
        "mine1", "mine2", "other-space",
    ]  # fmt: skip
    assert names(list(store.scroll(Kind.FACTS, "t2", "s"))) == ["other-tenant"]
    assert store.count(Kind.FACTS, "t", "s") == 2
    assert store.count(Kind.FACTS, "t", None) == 3
    assert store.count(Kind.FACTS, "t2", None) == 2
    assert store.count(Kind.FACTS, "nobody", None) == 0
    everyone = [rid(n) for n in ("mine1", "other-space", "other-tenant", "other-both")]
    assert names(store.retrieve(Kind.FACTS, "t", "s", everyone)) == ["mine1"]
    assert names(store.retrieve(Kind.FACTS, "t2", "s2", everyone)) == ["other-both"]


def test_delete_never_reaches_another_tenant_or_space(store: Store) -> None:
    _populate_scopes(store)
    targets = [rid(n) for n in ("mine1", "other-space", "other-tenant", "other-both")]
    store.delete(Kind.FACTS, "t", "s", targets)
    assert names(list(store.scroll(Kind.FACTS, "t", "s"))) == ["mine2"]
    assert store.count(Kind.FACTS, "t", "s2") == 1
    assert store.count(Kind.FACTS, "t2", None) == 2
    store.delete(Kind.FACTS, "t", "s", [])


def test_delete_scope_empties_one_space_only(store: Store) -> None:
    _populate_scopes(store)
    store.upsert(Kind.EVENTS, [pt("event")])
    store.delete_scope(Kind.FACTS, "t", "s")
    assert store.count(Kind.FACTS, "t", "s") == 0
    assert names(list(store.scroll(Kind.FACTS, "t", "s2"))) == ["other-space"]
    assert names(list(store.scroll(Kind.FACTS, "t2", "s"))) == ["other-tenant"]
    assert store.count(Kind.FACTS, "t2", "s2") == 1
    assert store.count(Kind.EVENTS, "t", "s") == 1  # another kind of the same space stays


def test_delete_by_ids(store: Store) -> None:
    store.upsert(Kind.EVENTS, [pt(f"e{i}") for i in range(5)])
    store.delete(Kind.EVENTS, "t", "s", [rid("e1"), rid("e3"), rid("never-stored")])
    assert sorted(names(list(store.scroll(Kind.EVENTS, "t", "s")))) == ["e0", "e2", "e4"]


def test_scroll_pages_through_everything_once(store: Store) -> None:
    wanted = {f"p{i:02d}" for i in range(3 * PAGE + 2)}
    store.upsert(Kind.FACTS, [pt(n) for n in sorted(wanted)])
    store.upsert(Kind.FACTS, [pt(f"x{i}", space="s2") for i in range(PAGE + 1)])
    got = names(list(store.scroll(Kind.FACTS, "t", "s", with_vectors=True)))
    assert len(got) == len(wanted) and set(got) == wanted
    assert all(p.vector is not None for p in store.scroll(Kind.FACTS, "t", "s", with_vectors=True))
    assert list(store.scroll(Kind.FACTS, "t", "empty")) == []


def test_retrieve_keeps_the_order_asked_and_drops_missing_ids(store: Store) -> None:
    store.upsert(Kind.FACTS, [pt(n) for n in ("a", "b", "c", "d")])
    asked = [rid("c"), rid("missing"), rid("a"), rid("d")]
    assert names(store.retrieve(Kind.FACTS, "t", "s", asked)) == ["c", "a", "d"]
    assert store.retrieve(Kind.FACTS, "t", "s", []) == []
    assert store.retrieve(Kind.FACTS, "t", "s", [rid("missing")]) == []


def test_count(store: Store) -> None:
    assert store.count(Kind.FACTS, "t", "s") == 0
    store.upsert(Kind.FACTS, [pt(f"c{i}") for i in range(7)])
    store.upsert(Kind.FACTS, [pt("c0")])  # an upsert of a stored id adds nothing
    assert store.count(Kind.FACTS, "t", "s") == 7
    assert store.count(Kind.EVENTS, "t", "s") == 0


@pytest.mark.parametrize("missing", ["tenant", "space"])
def test_points_without_tenant_or_space_are_refused(store: Store, missing: str) -> None:
    payload = {"tenant": "t", "space": "s", "name": "x"}
    del payload[missing]
    with pytest.raises(ValueError, match="tenant/space"):
        store.upsert(Kind.FACTS, [Point(rid("x"), payload, vec(1, 0, 0, 0))])
    with pytest.raises(ValueError, match="tenant/space"):
        store.write([(Kind.EVENTS, pt("ok")), (Kind.FACTS, Point(rid("x"), payload))])
    assert store.count(Kind.EVENTS, "t", "s") == 0  # nothing of the refused batch is written
    assert store.count(Kind.FACTS, "t", None) == 0


@pytest.mark.parametrize("kind", [Kind.SESSIONS, Kind.SPACES])
def test_a_vectorless_kind(store: Store, kind: Kind) -> None:
    store.upsert(kind, [pt("r1", vector=False, body={"turns": ["hi"]}), pt("r2", vector=False)])
    got = store.retrieve(kind, "t", "s", [rid("r2"), rid("r1")], with_vectors=True)
    assert names(got) == ["r2", "r1"]
    assert got[1].payload["body"] == {"turns": ["hi"]}
    assert all(p.vector is None for p in got)
    assert store.count(kind, "t", "s") == 2
    store.delete(kind, "t", "s", [rid("r1")])
    assert names(list(store.scroll(kind, "t", "s"))) == ["r2"]


def _everything(store: Store) -> dict[Kind, list[str]]:
    return {
        kind: sorted(
            json.dumps(
                [p.id, p.payload, None if p.vector is None else p.vector.tolist()], sort_keys=True
            )
            for p in store.scroll(kind, "t", None, with_vectors=True)
        )
        for kind in Kind
    }


def test_close_and_reopen_keeps_everything(opener: Opener) -> None:
    first = opener()
    first.write([(Kind.FACTS, pt(f"f{i}")) for i in range(2 * PAGE)] + [
        (Kind.SESSIONS, pt("sess", vector=False)),
        (Kind.EVENTS, pt("gone")),
    ])  # fmt: skip
    first.delete(Kind.EVENTS, "t", "s", [rid("gone")])
    before = _everything(first)
    first.close()
    again = opener()
    assert _everything(again) == before
    assert again.count(Kind.FACTS, "t", "s") == 2 * PAGE
    assert again.count(Kind.EVENTS, "t", "s") == 0
    assert again.count(Kind.SESSIONS, "t", "s") == 1
