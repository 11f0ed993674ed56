"""The embedded store's own promises: one owning process, safe calls from threads, bad
directories refused untouched, and write faults that fail cleanly (the job too)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path

import pytest
import qdrant_edge as qe

from common.memory.stages import Next, drain_stage
from common.store import records
from common.store.base import Kind, Point, StoreError, StoreFormatError, StoreUnavailable
from common.store.edge import INDEXED_FIELDS, MARKER, EdgeStore, _disk_failure, _Gate
from tests.helpers.contexts import OPEN_STORES, make_ctx
from tests.helpers.doubles import unit
from tests.helpers.records import draft, queued_head, session_record

ROOT = Path(__file__).resolve().parents[2]
DIM = 4


def pt(name: str, space: str = "s", **extra: object) -> Point:
    return Point(name, {"tenant": "t", "space": space, **extra}, unit(1, 2, 3, len(name)))


def opened(path: Path, dimension: int = DIM, page: int = 1024) -> EdgeStore:
    store = EdgeStore(path, dimension, scroll_page=page)
    OPEN_STORES.append(store)
    return store


def populated(path: Path) -> Path:
    store = EdgeStore(path, DIM)
    store.upsert(Kind.FACTS, [pt("a"), pt("b")])
    store.close()
    return path


# -- ownership ------------------------------------------------------------------------------

CONTENDER = """
import sys
from pathlib import Path
from common.store.base import Kind, StoreBusy
from common.store.edge import EdgeStore
store = EdgeStore(Path(sys.argv[1]), 4)
try:
    print("count", store.count(Kind.FACTS, "t", "s"))
except StoreBusy as exc:
    print("busy", exc)
store.close()
"""


def contend(path: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-c", CONTENDER, str(path)],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    return done.stdout.strip()


def test_a_second_process_is_refused_until_the_owner_closes(tmp_path: Path) -> None:
    path = tmp_path / "store"
    owner = opened(path)
    owner.upsert(Kind.FACTS, [pt("a")])
    said = contend(path)
    assert said.startswith("busy") and "\n" not in said
    assert str(path) in said and f"pid {os.getpid()} " in said
    assert owner.count(Kind.FACTS, "t", "s") == 1  # the owner is unaffected
    owner.close()
    assert contend(path) == "count 1"
    again = opened(path)
    assert again.count(Kind.FACTS, "t", "s") == 1  # the contender let go when it closed


# -- threads --------------------------------------------------------------------------------


def test_concurrent_calls_from_threads_lose_nothing(tmp_path: Path) -> None:
    """Upserts, deletes and every read at once from several threads on one store (each
    update flushed), while another thread compacts (rewrites the shard) three times; the end
    state is exactly what the operations imply."""
    store = opened(tmp_path / "store", page=5)
    threads, rounds = 6, 40
    errors: list[BaseException] = []
    start = threading.Barrier(threads + 1)
    stop = threading.Event()
    compactions = 0

    def compact() -> None:
        nonlocal compactions
        try:
            start.wait()
            while not stop.wait(0.2) and compactions < 3:
                store.compact()
                compactions += 1
        except BaseException as exc:
            errors.append(exc)

    def work(w: int) -> None:
        space = f"s{w}"
        try:
            start.wait()
            for i in range(rounds):
                name = f"w{w}-{i}"
                store.write([(Kind.FACTS, pt(name, space, i=i)), (Kind.EVENTS, pt(name, "shared"))])
                if i % 3 == 0:
                    store.delete(Kind.FACTS, "t", space, [name])
                assert len(store.retrieve(Kind.EVENTS, "t", "shared", [name])) == 1
                seen = {p.id for p in store.scroll(Kind.FACTS, "t", space)}
                assert seen == {f"w{w}-{j}" for j in range(i + 1) if j % 3}
                assert store.count(Kind.FACTS, "t", space) == len(seen)
                store.count(Kind.EVENTS, "t", None)
        except BaseException as exc:  # reported below, with the thread's own traceback
            errors.append(exc)

    pool = [threading.Thread(target=work, args=(w,)) for w in range(threads)]
    compactor = threading.Thread(target=compact)
    for thread in [*pool, compactor]:
        thread.start()
    for thread in pool:
        thread.join()
    stop.set()
    compactor.join()
    assert errors == []
    assert compactions > 0
    for w in range(threads):
        wanted = {f"w{w}-{i}" for i in range(rounds) if i % 3}
        assert {p.id for p in store.scroll(Kind.FACTS, "t", f"s{w}")} == wanted
    assert store.count(Kind.EVENTS, "t", "shared") == threads * rounds
    store.delete_scope(Kind.EVENTS, "t", "shared")
    assert store.count(Kind.EVENTS, "t", None) == 0


# -- bad directories ------------------------------------------------------------------------


def listing(root: Path) -> dict[str, tuple[int, bytes | None]]:
    """Every entry under root with its modification time and, for files, its bytes."""
    return {
        str(p.relative_to(root)): (p.stat().st_mtime_ns, p.read_bytes() if p.is_file() else None)
        for p in sorted(root.rglob("*"))
    }


def old_local_mode(path: Path) -> None:
    from qdrant_client import QdrantClient, models

    client = QdrantClient(path=str(path))
    client.create_collection(
        "atommem_facts", vectors_config=models.VectorParams(size=4, distance=models.Distance.COSINE)
    )
    client.upsert(
        "atommem_facts", [models.PointStruct(id=1, vector=[1.0, 0.0, 0.0, 0.0], payload={})]
    )
    client.close()


def foreign(path: Path) -> None:
    path.mkdir()
    (path / "notes.txt").write_text("mine")
    (path / "photos").mkdir()


def rewrite_marker(**change: object) -> Callable[[Path], None]:
    def make(path: Path) -> None:
        populated(path)
        info = json.loads((path / MARKER).read_text())
        (path / MARKER).write_text(json.dumps({**info, **change}))

    return make


def corrupt(relative: str, glob: str) -> Callable[[Path], None]:
    def make(path: Path) -> None:
        populated(path)
        for target in (path / relative).rglob(glob):
            target.write_bytes(b"\0garbage")

    return make


BAD = {
    "qdrant-client local mode": (old_local_mode, "qdrant-client local mode", "space push"),
    "foreign files": (foreign, "notes.txt", "choose an empty directory"),
    "newer engine": (rewrite_marker(engine_version="99.0.0"), "newer than", "upgrade"),
    "other dimension": (rewrite_marker(dimension=384), "384-d", "model it was built with"),
    "corrupt shard config": (corrupt("shard", "edge_config.json"), "cannot be opened", "restore"),
    "corrupt segment": (corrupt("shard/segments", "version.info"), "cannot be opened", "restore"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_a_directory_it_cannot_open_is_refused_untouched(tmp_path: Path, case: str) -> None:
    make, what, todo = BAD[case]
    path = tmp_path / "store"
    make(path)
    before = listing(path)
    with pytest.raises(StoreFormatError) as caught:
        opened(path).count(Kind.FACTS, "t", "s")
    message = str(caught.value)
    assert "\n" not in message and str(path) in message
    assert what in message and todo in message
    assert listing(path) == before
    with pytest.raises(StoreFormatError):  # and again, the same way
        opened(path).upsert(Kind.FACTS, [pt("x")])
    assert listing(path) == before


def test_a_corrupt_log_is_refused_with_the_data_untouched(tmp_path: Path) -> None:
    """The engine loads the segments before it reads the log: that folds in and removes their
    tracker journals and touches times, but no file that stays changes its contents."""
    path = populated(tmp_path / "store")
    for target in (path / "shard" / "wal").glob("open-*"):
        with target.open("r+b") as handle:
            handle.write(b"\0garbage" * 8)
    before = listing(path)
    with pytest.raises(StoreFormatError, match="restore it from a copy"):
        opened(path).count(Kind.FACTS, "t", "s")
    after = listing(path)
    assert {Path(k).name for k in set(before) - set(after)} <= {"tracker_journal.dat"}
    assert set(after) <= set(before)
    assert {k: v[1] for k, v in after.items()} == {k: before[k][1] for k in after}


def run_cli(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ATOMMEM_")}
    env["ATOMMEM_EMBEDDING__DIMENSION"] = str(DIM)
    atommem = Path(sys.executable).with_name("atommem")
    return subprocess.run(
        [str(atommem), "--data-dir", str(data_dir), *args],
        cwd=data_dir.parent, env=env, capture_output=True, text=True, timeout=180,
    )  # fmt: skip


@pytest.mark.parametrize("case", ["qdrant-client local mode", "newer engine", "corrupt segment"])
def test_the_cli_says_what_is_wrong_in_one_line(tmp_path: Path, case: str) -> None:
    make, what, todo = BAD[case]
    path = tmp_path / "data" / "qdrant"
    path.parent.mkdir()
    make(path)
    before = listing(path)
    done = run_cli(tmp_path / "data", "stats")
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
    assert str(path) in lines[0] and what in lines[0] and todo in lines[0]
    assert listing(path) == before


# -- faults at write time -------------------------------------------------------------------


def mount(args: list[str]) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a small filesystem")
    done = subprocess.run(["mount", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount here: {done.stderr.strip()}")


def unmount(point: Path) -> None:
    subprocess.run(["umount", str(point)], capture_output=True, check=False)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 128 MiB ext4 filesystem on a loop device: a real disk that can fill up."""
    image, point = tmp_path / "disk.img", tmp_path / "disk"
    point.mkdir()
    with image.open("wb") as handle:
        handle.truncate(128 * 2**20)
    if shutil.which("mkfs.ext4") is None:
        pytest.skip("mkfs.ext4 is not installed")
    subprocess.run(["mkfs.ext4", "-q", str(image)], check=True, capture_output=True)
    mount(["-o", "loop", str(image), str(point)])
    yield point
    while OPEN_STORES:  # closed before the filesystem goes
        OPEN_STORES.pop().close()
    unmount(point)


def test_a_full_disk_refuses_the_write_and_keeps_the_earlier_state(small_disk: Path) -> None:
    path = populated(small_disk / "store")
    store = opened(path)
    assert store.count(Kind.FACTS, "t", "s") == 2
    filler = small_disk / "filler"
    with filler.open("wb") as handle, pytest.raises(OSError):  # noqa: PT012 - fill to the end
        while True:
            handle.write(b"\0" * 2**20)
    with pytest.raises(StoreUnavailable, match=r"MiB free on its disk.*once space is freed"):
        store.upsert(Kind.FACTS, [pt("c"), pt("a", text="changed")])
    with pytest.raises(StoreError):
        store.delete_scope(Kind.FACTS, "t", "s")
    store.close()
    filler.unlink()
    again = opened(path)
    assert {p.id: p.payload for p in again.scroll(Kind.FACTS, "t", "s")} == {
        "a": {"tenant": "t", "space": "s"},
        "b": {"tenant": "t", "space": "s"},
    }
    again.upsert(Kind.FACTS, [pt("c")])  # with space again, writes go through
    assert again.count(Kind.FACTS, "t", "s") == 3


def test_a_read_only_directory_refuses_the_write_and_keeps_the_earlier_state(
    tmp_path: Path,
) -> None:
    path = populated(tmp_path / "store")
    before = listing(path)
    if os.geteuid() == 0:  # root writes through file modes: a read-only bind mount instead
        view = tmp_path / "view"
        view.mkdir()
        mount(["--bind", "-o", "ro", str(path), str(view)])
        target = view
    else:
        for entry in [path, *path.rglob("*")]:
            entry.chmod(entry.stat().st_mode & ~0o222)
        target = path
    try:
        store = opened(target)
        with pytest.raises(StoreError, match=r"lock file .*writable directory|read-only"):
            store.upsert(Kind.FACTS, [pt("c")])
        store.close()
    finally:
        if target != path:
            unmount(target)
        else:
            for entry in [path, *path.rglob("*")]:
                entry.chmod(entry.stat().st_mode | 0o200)
    assert listing(path) == before
    again = opened(path)
    assert sorted(p.id for p in again.scroll(Kind.FACTS, "t", "s")) == ["a", "b"]


def test_a_commit_into_a_store_that_cannot_write_fails_the_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store's own free-space check refuses the commit's writes (as on a full disk)."""
    ctx = make_ctx(tmp_path)
    rec = session_record("s1", 0, datetime(2024, 3, 1), ["Ann"])
    coord = queued_head(ctx, rec, tmp_path / "c.sqlite")
    drafts = [draft(rec, "Ann moved to Oslo.", unit(1, 0, 0, 0), ["oslo"], ["Ann"])]
    body = {"drafts": [d.model_dump(mode="json") for d in drafts]}
    coord.chunks.put_chunk("t", "s", "s1", 0, 1, json.dumps(body))
    facts_before = ctx.store.count(Kind.FACTS, "t", "s")

    monkeypatch.setattr(EdgeStore, "_free_bytes", lambda self: 2**20)
    assert drain_stage(ctx, coord, "t", "s") == Next.DRAIN
    after = coord.jobs.get_job("t", "j1")
    assert after is not None and after.state == "failed"
    assert after.reason is not None and "1 MiB free on its disk" in after.reason
    assert str(tmp_path) not in after.reason  # the tenant reads it: no server path
    assert coord.sequence.head("t", "s") is None  # the space moves on
    monkeypatch.undo()
    assert ctx.store.count(Kind.FACTS, "t", "s") == facts_before
    stored = records.get_session(ctx.store, "t", "s", "s1")
    assert stored is not None and stored.status == "accepted" and stored.plan is None


def test_an_exclusive_call_interrupted_while_waiting_leaves_the_gate_usable() -> None:
    gate = _Gate()
    real_wait = gate._cond.wait

    def interrupted(timeout: float | None = None) -> bool:
        raise KeyboardInterrupt  # as a Celery soft time limit raises inside the wait

    with gate.shared():
        gate._cond.wait = interrupted  # type: ignore[method-assign]
        with pytest.raises(KeyboardInterrupt), gate.exclusive():
            pass
        gate._cond.wait = real_wait  # type: ignore[method-assign]
    entered = threading.Event()

    def later() -> None:
        with gate.shared():
            entered.set()
        with gate.exclusive():
            pass

    thread = threading.Thread(target=later, daemon=True)
    thread.start()
    thread.join(timeout=30)  # a hang detector only: before the fix it waits forever
    assert entered.is_set() and not thread.is_alive()


def test_a_compaction_interrupted_during_its_swap_leaves_a_usable_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = opened(tmp_path / "store")
    store.upsert(Kind.FACTS, [pt("a"), pt("b")])

    def interrupted(self: EdgeStore, shard: object, fresh_dir: Path) -> object:
        shard.close()  # type: ignore[attr-defined]
        raise KeyboardInterrupt

    monkeypatch.setattr(EdgeStore, "_swap_in", interrupted)
    with pytest.raises(KeyboardInterrupt):
        store.compact()
    monkeypatch.undo()
    # the closed shard is not served: the next call loads it again (and finishes the scrub)
    assert store.count(Kind.FACTS, "t", "s") == 2
    store.upsert(Kind.FACTS, [pt("c")])
    assert {p.id for p in store.scroll(Kind.FACTS, "t", "s")} == {"a", "b", "c"}


@pytest.mark.parametrize(
    ("why", "disk"),
    [
        ("No space left on device (os error 28)", True),
        ("Read-only file system (os error 30)", True),
        ("Input/output error (os error 5)", True),
        ("Disk quota exceeded (os error 122)", True),
        ('WAL flush failed: Os { code: 30, kind: ReadOnlyFilesystem, message: "x" }', True),
        ("Service internal error: wrong input: vector dimension error", False),
        ("something (os error 50)", False),
    ],
)
def test_disk_failures_are_told_from_other_engine_errors(why: str, disk: bool) -> None:
    assert _disk_failure(why) is disk


def test_an_update_the_engine_rejects_is_an_error_not_unavailable(tmp_path: Path) -> None:
    store = opened(tmp_path / "store")
    store.upsert(Kind.FACTS, [pt("a")])
    wrong = Point("x", {"tenant": "t", "space": "s"}, unit(1, 2, 3, 4, 5))  # 5-d, store is 4-d
    with pytest.raises(StoreError) as refused:
        store.upsert(Kind.FACTS, [wrong])
    assert not isinstance(refused.value, StoreUnavailable)
    assert {p.id for p in store.scroll(Kind.FACTS, "t", "s")} == {"a"}


def _indexed(path: Path) -> set[str]:
    shard = qe.EdgeShard.load(str(path / "shard"))
    try:
        return set(shard.info().payload_schema)
    finally:
        shard.close()


def test_only_the_fields_filters_use_are_indexed_also_in_a_store_of_an_earlier_release(
    tmp_path: Path,
) -> None:
    path = populated(tmp_path / "store")
    assert _indexed(path) == set(INDEXED_FIELDS)
    # an earlier release's shard: indexes on fields that no filter uses
    shard = qe.EdgeShard.load(str(path / "shard"))
    shard.update(
        qe.UpdateOperation.create_field_index("participants", qe.PayloadSchemaType.Keyword)
    )
    shard.update(
        qe.UpdateOperation.create_field_index("time.session", qe.PayloadSchemaType.Datetime)
    )
    shard.flush()
    shard.close()
    assert _indexed(path) == {*INDEXED_FIELDS, "participants", "time.session"}
    store = opened(path)
    assert {p.id for p in store.scroll(Kind.FACTS, "t", "s")} == {"a", "b"}
    store.close()
    assert _indexed(path) == set(INDEXED_FIELDS)
