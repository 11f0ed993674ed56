"""The embedded store on filesystems that fail: an update the disk cannot take is refused
(never acknowledged, never served from memory), a tiny filesystem is refused with a clear
error instead of killing the process, a refusal reaches tenants as 503 with no server path,
and a scrub (the shard's rewrite after an erasure) interrupted at any point is finished at
the next open. Real loop-mounted ext4 and tmpfs mounts; skipped where mounting is not allowed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from api.errors import install
from common.store.base import Kind, Point, StoreError, StoreUnavailable
from common.store.edge import MIN_FREE_BYTES, NEXT, OLD, SCRUB_PENDING, SHARD, EdgeStore
from tests.helpers.doubles import unit

ROOT = Path(__file__).resolve().parents[2]
MARKER = "Quillfeather"


def pt(name: str, **extra: object) -> Point:
    return Point(name, {"tenant": "t", "space": "s", **extra}, unit(1, 2, 3, len(name)))


def mount(args: list[str]) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a filesystem")
    done = subprocess.run(["mount", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount here: {done.stderr.strip()}")


def unmount(point: Path) -> None:
    done = subprocess.run(["umount", str(point)], capture_output=True, check=False)
    if done.returncode != 0:  # busy: a failed test left a store open on it
        subprocess.run(["umount", "-l", str(point)], capture_output=True, check=False)


def holding(root: Path, needle: str) -> list[str]:
    data = needle.encode()
    return [str(p) for p in root.rglob("*") if p.is_file() and data in p.read_bytes()]


@pytest.fixture
def ext4(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A 128 MiB ext4 filesystem on a loop device, mounted with errors=remount-ro."""
    if shutil.which("mkfs.ext4") is None or shutil.which("e2fsck") is None:
        pytest.skip("mkfs.ext4 and e2fsck are not installed")
    image, point = tmp_path / "disk.img", tmp_path / "disk"
    point.mkdir()
    with image.open("wb") as handle:
        handle.truncate(128 * 2**20)
    subprocess.run(["mkfs.ext4", "-q", str(image)], check=True, capture_output=True)
    mount(["-o", "loop,errors=remount-ro", str(image), str(point)])
    yield image, point
    unmount(point)


def fail_filesystem(point: Path) -> None:
    """Put the mounted ext4 filesystem into emergency read-only, as a disk error does."""
    device = subprocess.run(
        ["findmnt", "-n", "-o", "SOURCE", str(point)], capture_output=True, text=True, check=True
    ).stdout.strip()
    trigger = Path("/sys/fs/ext4") / os.path.basename(device) / "trigger_fs_error"
    if not trigger.exists():
        pytest.skip(f"this kernel has no {trigger}")
    trigger.write_text("1")


def test_an_update_the_disk_cannot_take_is_refused_and_not_served(
    ext4: tuple[Path, Path],
) -> None:
    image, point = ext4
    store = EdgeStore(point / "store", 4)
    store.upsert(Kind.FACTS, [pt("a", text=MARKER), pt("b")])
    fail_filesystem(point)
    # The engine maps its log into memory: the update itself "succeeds"; its flush does not.
    with pytest.raises(StoreUnavailable) as refused:
        store.delete(Kind.FACTS, "t", "s", ["a"])
    assert str(point) not in str(refused.value)  # tenants never see the server's path
    # Not served from memory either: the shard was dropped and cannot be loaded read-only.
    with pytest.raises(StoreUnavailable, match="(?i)read-only"):
        store.count(Kind.FACTS, "t", "s")
    store.close()
    unmount(point)
    subprocess.run(["e2fsck", "-fy", str(image)], capture_output=True, check=False)
    mount(["-o", "loop", str(image), str(point)])
    again = EdgeStore(point / "store", 4)
    try:
        # what was acknowledged is there; what was refused was never acknowledged
        assert {p.id for p in again.scroll(Kind.FACTS, "t", "s")} == {"a", "b"}
        again.delete(Kind.FACTS, "t", "s", ["a"])
        assert {p.id for p in again.scroll(Kind.FACTS, "t", "s")} == {"b"}
    finally:
        again.close()


def test_a_store_on_a_tiny_filesystem_is_refused_with_a_clear_error(tmp_path: Path) -> None:
    point = tmp_path / "tiny"
    point.mkdir()
    mount(["-t", "tmpfs", "-o", "size=6m", "tmpfs", str(point)])
    try:
        done = subprocess.run(
            [sys.executable, "-m", "cli", "--quiet", "--data-dir", str(point / "data"),
             "space", "create", "demo"],
            cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
    finally:
        unmount(point)
    assert done.returncode > 0, (done.returncode, done.stderr)  # not killed by a signal
    assert "MiB free on its disk, it needs 64 MiB" in done.stderr


def test_a_refusal_reaches_tenants_as_503_with_retry_after() -> None:
    app = FastAPI()
    install(app)

    @app.get("/write")
    def write() -> None:
        raise StoreUnavailable("writing to the store refused: 1 MiB free on its disk")

    answer = TestClient(app).get("/write")
    assert answer.status_code == 503
    assert int(answer.headers["Retry-After"]) >= 1
    assert answer.json() == {"detail": "writing to the store refused: 1 MiB free on its disk"}


def erased_store(path: Path) -> EdgeStore:
    """A store where `a` (holding MARKER) was written and then deleted, not yet scrubbed."""
    store = EdgeStore(path, 4)
    store.upsert(Kind.FACTS, [pt("a", text=MARKER), pt("b", text="kept")])
    store.delete(Kind.FACTS, "t", "s", ["a"])
    return store


def after_reopen(path: Path) -> None:
    again = EdgeStore(path, 4)
    try:
        assert [(p.id, p.payload["text"]) for p in again.scroll(Kind.FACTS, "t", "s")] == [
            ("b", "kept")
        ]
        assert holding(path, MARKER) == []
        assert not any((path / n).exists() for n in (NEXT, OLD, SCRUB_PENDING))
        again.upsert(Kind.FACTS, [pt("c")])  # and it takes writes
        assert again.count(Kind.FACTS, "t", "s") == 2
    finally:
        again.close()


def test_compaction_leaves_no_erased_text_in_any_file(tmp_path: Path) -> None:
    store = erased_store(tmp_path / "store")
    assert any("/wal/" in f for f in holding(tmp_path / "store", MARKER))
    store.compact()
    assert holding(tmp_path / "store", MARKER) == []
    store.close()
    after_reopen(tmp_path / "store")


def test_a_scrub_interrupted_between_its_renames_is_finished_at_the_next_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "store"
    store = erased_store(path)
    real = os.replace

    def interrupted(src: object, dst: object) -> None:
        if Path(str(src)).name == NEXT:
            raise OSError("interrupted")
        real(src, dst)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(StoreError):
        store.compact()
    monkeypatch.undo()
    assert not (path / SHARD).exists() and (path / OLD).exists() and (path / NEXT).exists()
    store.close()
    after_reopen(path)


def test_a_scrub_interrupted_while_copying_is_run_again_at_the_next_open(
    tmp_path: Path,
) -> None:
    path = tmp_path / "store"
    erased_store(path).close()
    (path / NEXT).mkdir()  # a half-built copy
    (path / NEXT / "junk").write_bytes(b"partial")
    (path / SCRUB_PENDING).write_bytes(b"")
    assert holding(path, MARKER)  # the old shard's log still holds it
    after_reopen(path)


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 512 MiB tmpfs: room for a small store (20 to 95 MiB: log segments) and its scrub."""
    point = tmp_path / "small"
    point.mkdir()
    mount(["-t", "tmpfs", "-o", "size=512m", "tmpfs", str(point)])
    yield point
    unmount(point)


def free_bytes(path: Path) -> int:
    stat = os.statvfs(path)
    return stat.f_bavail * stat.f_frsize


def fill(path: Path, leave: int) -> Path:
    """A file taking all but `leave` bytes of the filesystem under `path`."""
    filler = path / "filler"
    with filler.open("wb") as handle:
        handle.write(b"\0" * max(free_bytes(path) - leave, 0))
    return filler


def many_erased(path: Path) -> EdgeStore:
    """`erased_store`, with enough points that a scrub copies more than one page."""
    store = erased_store(path)
    store.upsert(Kind.FACTS, [pt(f"p{i}", text="kept") for i in range(1200)])
    return store


def test_a_scrub_that_runs_out_of_disk_midway_leaves_a_usable_store(
    tmpfs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmpfs / "store"
    store = many_erased(path)
    real = EdgeStore._check_writable
    calls = []

    def filling(self: EdgeStore, doing: str, need: int = MIN_FREE_BYTES) -> None:
        calls.append(doing)
        if doing == "compacting" and (path / NEXT).exists() and not (tmpfs / "filler").exists():
            fill(tmpfs, MIN_FREE_BYTES // 2)  # taken by others while the copy grows
        real(self, doing, need)

    monkeypatch.setattr(EdgeStore, "_check_writable", filling)
    with pytest.raises(StoreUnavailable, match="MiB free on its disk"):
        store.compact()
    monkeypatch.undo()
    assert calls.count("compacting") >= 2  # it started copying
    assert not (path / NEXT).exists()  # the copy holds no space
    assert (path / SCRUB_PENDING).exists()
    assert store.count(Kind.FACTS, "t", "s") == 1201  # still served as it was
    (tmpfs / "filler").unlink()
    store.close()
    again = EdgeStore(path, 4)  # opens, and runs the scrub now that there is room
    try:
        assert again.count(Kind.FACTS, "t", "s") == 1201
        assert holding(path, MARKER) == []
        assert not (path / SCRUB_PENDING).exists()
    finally:
        again.close()


def test_a_scrub_with_no_room_for_its_copy_is_refused_and_left_pending(tmpfs: Path) -> None:
    path = tmpfs / "store"
    store = many_erased(path)
    fill(tmpfs, MIN_FREE_BYTES + 2**20)  # writes fit, a second copy of the shard does not
    with pytest.raises(StoreUnavailable, match="compacting the store refused") as refused:
        store.compact()
    assert str(tmpfs) not in str(refused.value)
    assert not (path / NEXT).exists()
    assert (path / SCRUB_PENDING).exists()  # the next open scrubs
    # the shard was never closed: it serves reads and takes writes
    store.upsert(Kind.FACTS, [pt("c")])
    assert store.count(Kind.FACTS, "t", "s") == 1202
    (tmpfs / "filler").unlink()
    store.close()
    again = EdgeStore(path, 4)
    try:
        assert again.count(Kind.FACTS, "t", "s") == 1202  # opened, and scrubbed
        assert holding(path, MARKER) == []
        assert not (path / SCRUB_PENDING).exists()
    finally:
        again.close()


def test_a_leftover_copy_holding_the_free_space_does_not_block_the_open(tmpfs: Path) -> None:
    path = tmpfs / "store"
    many_erased(path).close()
    # a scrub's half-built copy (killed before it could delete it) holding the space
    (path / NEXT).mkdir()
    (path / SCRUB_PENDING).write_bytes(b"")
    fill(path / NEXT, MIN_FREE_BYTES // 2)
    again = EdgeStore(path, 4)
    try:
        assert again.count(Kind.FACTS, "t", "s") == 1201
        assert not (path / NEXT).exists()
        assert holding(path, MARKER) == []  # and the scrub ran again
    finally:
        again.close()


def test_an_erasure_the_store_refuses_leaves_the_session_in_flight(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from common.memory import admin
    from common.models.responses import Erased
    from common.store import records

    cancelled = []

    def refused(*args: object) -> None:
        raise StoreUnavailable("writing to the store refused: 1 MiB free on its disk")

    monkeypatch.setattr(admin, "cancel_session", lambda *args: cancelled.append(args))
    monkeypatch.setattr(records, "delete_session", refused)
    with pytest.raises(StoreUnavailable):
        admin._cancel(SimpleNamespace(store=None), None, "t", "s", "s1", Erased())  # type: ignore[arg-type]
    assert cancelled == []  # its job and payload stay for the erasure's retry
