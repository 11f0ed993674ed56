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

# kombu's Redis transport keeps a list per priority step, and a worker reads every queue's
# default list before any later step, the queues of one step in turn (round robin: the queue
# it just took from goes last). The fair lanes' tasks and the questions share the last step,
# so however many questions wait, a worker takes at least every other task from the lanes
# while they have work; accepts, profile batches, reads and pings still go first.
SHARED_PRIORITY = 9
TASK_PRIORITY: dict[TaskName, int] = {
    TaskName.EXTRACT_NEXT: SHARED_PRIORITY,
    TaskName.MEMORY_NEXT: SHARED_PRIORITY,
    TaskName.SEARCH: SHARED_PRIORITY,
    TaskName.ASK: SHARED_PRIORITY,
}

TASK_ROUTES: dict[str, dict[str, str]] = {
    name.value: {"queue": queue.value} for name, queue in TASK_QUEUE.items()
}
