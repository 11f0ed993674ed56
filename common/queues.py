"""Queue and task names and the routes between them; import-light so any producer can route."""

from __future__ import annotations

from enum import StrEnum


class Queue(StrEnum):
    INGEST = "ingest"
    EXTRACT = "extract"
    MEMORY = "memory"
    PROFILE = "profile"
    QUERY = "query"


class TaskName(StrEnum):
    ACCEPT = "atommem.ingest.accept"
    # Extracts a chunk of a session's turns (every turn's window in one batch); the wire name
    # stays, as queued messages carry it (docs/operations.md, "Upgrading").
    EXTRACT_CHUNK = "atommem.extract.window"
    DRAIN = "atommem.memory.drain"
    # Fair lanes (common.store.coordination.fair): run the next tenant's waiting step
    EXTRACT_NEXT = "atommem.extract.next"
    MEMORY_NEXT = "atommem.memory.next"
    ADMIN = "atommem.memory.admin"
    PROFILE = "atommem.profile.batch"
    SEARCH = "atommem.query.search"
    ASK = "atommem.query.ask"
    READ = "atommem.query.read"
    PING = "atommem.query.ping"


TASK_QUEUE: dict[TaskName, Queue] = {
    TaskName.ACCEPT: Queue.INGEST,
    TaskName.EXTRACT_CHUNK: Queue.EXTRACT,
    TaskName.DRAIN: Queue.MEMORY,
    TaskName.EXTRACT_NEXT: Queue.EXTRACT,
    TaskName.MEMORY_NEXT: Queue.MEMORY,
    TaskName.ADMIN: Queue.MEMORY,
    TaskName.PROFILE: Queue.PROFILE,
    TaskName.SEARCH: Queue.QUERY,
    TaskName.ASK: Queue.QUERY,
    TaskName.READ: Queue.QUERY,
    TaskName.PING: Queue.QUERY,
}

TASK_ROUTES: dict[str, dict[str, str]] = {
    name.value: {"queue": queue.value} for name, queue in TASK_QUEUE.items()
}
