"""What each task replies, by task name: the model the producer validates a worker's reply
into where it arrives, so that nothing untyped leaves it."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from common.models.memory import Event, Fact, Profile
from common.models.query import AskResponse, SearchResponse
from common.models.responses import (
    CorrectionReceipt,
    ErasureReceipt,
    JobList,
    Kind,
    Page,
    Ping,
    SessionSummary,
    Space,
    SpaceList,
    StoredSession,
)
from common.queues import TaskName

ONE: dict[Kind, Literal["fact", "event", "profile"]] = {
    "facts": "fact",
    "events": "event",
    "profiles": "profile",
}
Erasure = Literal["erase_fact", "erase_session", "erase_space"]

# By the task that answers and, for reads and admin writes, what it reads or does.
REPLIES: dict[tuple[TaskName, str | None], type[BaseModel]] = {
    (TaskName.SEARCH, None): SearchResponse,
    (TaskName.ASK, None): AskResponse,
    (TaskName.PING, None): Ping,
    (TaskName.READ, "spaces"): SpaceList,
    (TaskName.READ, "space"): Space,
    (TaskName.READ, "facts"): Page[Fact],
    (TaskName.READ, "fact"): Fact,
    (TaskName.READ, "events"): Page[Event],
    (TaskName.READ, "event"): Event,
    (TaskName.READ, "profiles"): Page[Profile],
    (TaskName.READ, "profile"): Profile,
    (TaskName.READ, "sessions"): Page[SessionSummary],
    (TaskName.READ, "session"): StoredSession,
    (TaskName.ADMIN, "create_space"): Space,
    (TaskName.ADMIN, "erase_fact"): ErasureReceipt,
    (TaskName.ADMIN, "erase_session"): ErasureReceipt,
    (TaskName.ADMIN, "erase_space"): ErasureReceipt,
    (TaskName.ADMIN, "correct_fact"): CorrectionReceipt,
    (TaskName.ADMIN, "rebuild_from"): JobList,
}
