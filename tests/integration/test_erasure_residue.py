"""Nothing of an erased session outlives its erasure in Redis (keys, replies, the append-only
file) or in a worker's log: real worker processes on a private `redis-server` with AOF."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import redis
from celery import Celery
from celery.exceptions import TimeoutError as CeleryTimeout

from common.celery_config import celery_config
from common.models.jobs import QueryPayload
from common.models.session import SessionInput, Turn
from common.producer import Producer
from common.queues import TaskName
from common.settings import BrokerSettings, Settings, StoreSettings
from common.store import keys, records
from common.store.backends import open_store
from common.store.coordination.roles import Coordination
from common.store.persistence import rewrite_after_erasure
from tests.helpers.redis import redis_text
from tests.helpers.redis_server import RedisServer, start_redis
from tests.helpers.workers import ALL_QUEUES, worker_env
from workers.launch import WorkerProcess
from workers.replies import GRACE_S

pytestmark = pytest.mark.integration

SECRET = "Quillfeather"  # only the erased session says it
GHOST = "Zorbulonian"  # only the session that failed before it was stored says it


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    srv = start_redis(tmp_path / "redis")
    client = srv.client()
    # Plain files, so a scan for the text is sound (no LZF, no RDB preamble in the AOF).
    client.config_set("rdbcompression", "no")
    client.config_set("aof-use-rdb-preamble", "no")
    client.close()
    yield srv
    srv.stop()


def _producer(url: str) -> tuple[Celery, Producer]:
    app = Celery("producer")
    app.conf.update(celery_config(Settings(broker=BrokerSettings(url=url))))
    coord = Coordination.redis(url, 3600)
    return app, Producer(app, coord.jobs, coord.sequence)


def _session(session_id: str, order: int, texts: list[str]) -> SessionInput:
    return SessionInput(
        session_id=session_id,
        started_at=datetime(2024, 3, order + 1, tzinfo=UTC),
        participants=["Ann", "Bob"],
        turns=[Turn(speaker="Ann" if i % 2 == 0 else "Bob", text=t) for i, t in enumerate(texts)],
    )


class TaskEvents:
    """Every task event the workers publish (what Flower sees), captured on a thread."""

    def __init__(self, app: Celery) -> None:
        self.seen: list[dict[str, object]] = []
        self._app = app
        self._receiver: object | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._ready = threading.Event()

    def _run(self) -> None:
        with self._app.connection_for_read() as conn:
            receiver = self._app.events.Receiver(conn, handlers={"*": self.seen.append})
            self._receiver = receiver
            self._ready.set()
            receiver.capture(limit=None, timeout=None, wakeup=False)

    def __enter__(self) -> TaskEvents:
        self._thread.start()
        self._ready.wait(10)
        time.sleep(0.5)  # subscribed before anything is sent
        return self

    def __exit__(self, *_: object) -> None:
        if self._receiver is not None:
            self._receiver.should_stop = True  # type: ignore[attr-defined]
        self._thread.join(10)


def _every_value(client: redis.Redis) -> str:
    """Every key and value of every database, as one text."""
    out = []
    for db in range(16):
        client.execute_command("SELECT", db)
        out += [f"{db} {line}" for line in redis_text(client).splitlines()]
    client.execute_command("SELECT", 0)
    return "\n".join(out)


def _disk(directory: Path) -> str:
    """Every file Redis keeps (AOF parts, manifest, snapshot), as one text."""
    texts = []
    for f in directory.rglob("*"):
        if f.name == "redis.log":
            continue
        try:
            texts.append(f.read_bytes().decode("latin-1"))
        except (FileNotFoundError, IsADirectoryError):
            continue  # a temp file Redis renamed or removed while we listed
    return "\n".join(texts)


def _eventually(check: Callable[[], bool], timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.2)
    return check()


def test_an_erased_session_leaves_nothing_in_redis_its_files_or_the_log(
    tmp_path: Path, server: RedisServer
) -> None:
    url = server.url(0)
    data = tmp_path / "data"
    store = open_store(StoreSettings(qdrant_path=data / "qdrant"), 384)
    records.create_space(store, "default", "s")
    store.close()
    app, client = _producer(url)
    stored = server.client()
    log = tmp_path / "worker.log"
    worker = WorkerProcess(worker_env(url, data), log, ALL_QUEUES, concurrency=1)
    try:
        worker.wait_ready()
        erased = _session(
            "a", 0, [f"I keep a zebra named {SECRET} in my garden.", "What a lovely name."]
        )
        kept = _session("b", 1, ["I started learning the violin.", "That sounds hard."])
        jobs = client.submit("default", "s", [erased, kept])
        assert [j.state for j in client.wait("default", [j.job_id for j in jobs], 300)] == [
            "done",
            "done",
        ]
        # A session that failed before its record was stored: its job still holds its turns.
        (ghost,) = client.submit("default", "ghost", [_session("g", 0, [f"I am {GHOST}."])])
        assert client.wait("default", [ghost.job_id], 300)[0].state == "failed"

        question = "What is the name of the zebra Ann keeps?"
        with TaskEvents(app) as events:
            assert SECRET in client.search("default", "s", question).model_dump_json()
            assert _eventually(lambda: any(e["type"] == "task-succeeded" for e in events.seen))
        succeeded = [e for e in events.seen if e["type"] == "task-succeeded"]
        assert succeeded and SECRET not in json.dumps(succeeded, default=str)
        with pytest.raises(CeleryTimeout):
            client.search("default", "s", question, timeout=0.001)  # the caller gives up
        answer = client.search("default", "s", question)  # served after the abandoned one
        assert SECRET in answer.model_dump_json()
        # A reply whose caller gave up was never stored.
        replies = [stored.get(k) or "" for k in stored.scan_iter("celery-task-meta-*")]
        assert not [r for r in replies if SECRET in r]
        # A caller that dies while waiting never reads its reply: the reply lives no longer
        # than that caller would have waited (plus a grace), and erasure takes it sooner.
        body = QueryPayload(
            enqueued_at=time.time(),
            reply_by=time.time() + 120,
            tenant="default",
            space="s",
            question=question,
        )
        orphan = app.send_task(TaskName.SEARCH.value, kwargs={"payload": body.model_dump()})
        meta = f"celery-task-meta-{orphan.id}"
        assert _eventually(lambda: SECRET in (stored.get(meta) or ""))
        assert 0 < stored.ttl(meta) <= 120 + GRACE_S

        receipt = client.erase("default", "s", "erase_session", "a")
        assert receipt.erased.sessions_deleted == ["a"]
        client.create_space("default", "ghost")
        receipt = client.erase("default", "ghost", "erase_session", "g")
        assert receipt.erased.sessions_deleted == ["g"]
        # the space still answers (with no floor: nothing left is about a zebra)
        after = client.search("default", "s", question, min_score=0.0)
        assert after.hits and SECRET not in after.model_dump_json()
        assert stored.get(meta) is None
    finally:
        worker.stop()

    assert SECRET not in _every_value(stored)
    assert GHOST not in _every_value(stored)
    # The worker asked for an AOF rewrite after the erasure; once it is done, the files
    # hold the dataset as it is now.
    assert _eventually(
        lambda: (
            not int(stored.info("persistence")["aof_rewrite_in_progress"])
            and not int(stored.info("persistence")["aof_rewrite_scheduled"])
            and SECRET not in _disk(server.directory)
        )
    ), "the erased text is still in Redis's files"
    assert GHOST not in _disk(server.directory)
    assert SECRET not in log.read_text(errors="replace")
    stored.close()


def test_parked_drafts_expire_within_a_day_whatever_the_job_ttl(server: RedisServer) -> None:
    coord = Coordination.redis(server.url(0), 7 * 24 * 3600)
    coord.chunks.put_chunk("t", "s", "x", 0, 2, json.dumps({"drafts": []}))
    ttl = server.client().ttl(keys.chunks("t", "s", "x"))
    coord.close()
    assert 0 < ttl <= 24 * 3600


def test_after_an_erasure_neither_the_aof_nor_the_snapshot_keeps_deleted_values(
    server: RedisServer,
) -> None:
    client = server.client()
    client.config_set("save", "3600 1")
    client.set("atommem:test", f"a value {SECRET} said")
    client.bgsave()
    assert _eventually(lambda: SECRET in _disk(server.directory))
    assert _eventually(lambda: not int(client.info("persistence")["rdb_bgsave_in_progress"]))
    client.delete("atommem:test")
    url = server.url(3)
    done = rewrite_after_erasure([url, server.url(0)])  # one server: asked once
    assert done == {url: "aof rewrite started, snapshot scheduled"}
    assert _eventually(lambda: SECRET not in _disk(server.directory)), "still on disk"
    client.close()
