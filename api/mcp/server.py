"""The MCP tools over a `Memory`, and the server that holds them. Each tool's input schema
comes from the project's models; every failure a caller can act on comes back as a tool error
(`isError`) that says what is wrong, and the server goes on serving."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from datetime import date, datetime
from typing import Annotated, Any

import anyio
import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp_types import CallToolResult, InputRequiredResult, ToolAnnotations
from pydantic import AfterValidator, BaseModel, Field

from api.mcp.errors import explain, unreadable
from common.models.api import (
    FACT_MAX,
    MAX_TURNS,
    SPACE_NAME,
    ContextBody,
    ListingFilter,
    QueryBody,
    SearchFilters,
    SessionBody,
)
from common.models.jobs import FINISHED, Job
from common.models.memory import Event, Fact, Profile, ProfileVersion
from common.models.messages import ChatMessage
from common.models.names import person_name
from common.models.query import (
    CONTEXT_TOKENS,
    AskResponse,
    ContextResponse,
    ProfileHit,
    RecallMode,
    SearchResponse,
)
from common.models.responses import (
    CorrectionReceipt,
    ErasureReceipt,
    FactHistory,
    JobList,
    Page,
    Space,
    SpaceList,
)
from common.models.session import NOT_BLANK
from common.retrieval.context import days
from common.service import Memory

Resolve = Callable[[Context], Memory]
WAIT_S = 300.0  # how long `wait=true` blocks before it hands back the running job
POLL_S = 0.2

INSTRUCTIONS = """\
AtomMem is long-term memory built from atomic facts. A space holds the memory of one person
or agent: add finished conversations to it (add_session, or add_messages for a plain list of
messages), then ask questions (ask for an answer with its evidence, search for ranked facts),
read a person's profile as it stood on a date (get_profile), and list, correct or erase what
is stored. Start with list_spaces; a space must exist (create_space) before sessions go into
it."""


def _segment(value: str) -> str:
    """An id the tools hand on, refused as the HTTP routes refuse it: '.' and '..' are no
    URL path segment, so no space, session, fact or job has one."""
    if value in (".", ".."):
        raise ValueError(f"{value!r} cannot be an id: no space, session, fact or job has it")
    return value


# Tool arguments are as strict as the HTTP bodies: an integer or a flag is a JSON number or
# boolean, never the text "5" or "yes" (nor an integer `true`).
SpaceArg = Annotated[
    str,
    Field(min_length=1, max_length=128, description="the space: one person's or agent's memory"),
    AfterValidator(_segment),
]
ItemId = Annotated[str, Field(min_length=1), AfterValidator(_segment)]
Question = Annotated[
    str,
    Field(
        min_length=1,
        max_length=2000,
        description="a question in plain words, e.g. 'Where does Priya live?'",
        json_schema_extra={"pattern": NOT_BLANK},
    ),
]
K = Annotated[
    int | None,
    Field(
        ge=1,
        le=100,
        strict=True,
        description="how many facts to return (default: retrieval.final_top_k, 10)",
    ),
]
Mode = Annotated[
    RecallMode | None,
    Field(description="the recall mode; leave unset for the configured one (`full`)"),
]
MinScore = Annotated[
    float | None,
    Field(
        ge=0.0,
        le=1.0,
        description="leave out hits whose relevance is below this (0-1); unset: the "
        "configured floor",
    ),
]
Filters = Annotated[
    SearchFilters | None,
    Field(
        description="only facts said in a time range (after/before), of given sessions "
        "(session_ids) or naming given people (participants)"
    ),
]
AsOf = Annotated[
    datetime | None,
    Field(
        description="when the question is asked (ISO 8601): relative dates and the profiles "
        "in force are read then; unset: now"
    ),
]
Limit = Annotated[int, Field(ge=1, le=1000, strict=True, description="how many items in this page")]
Offset = Annotated[
    int, Field(ge=0, le=10_000_000, strict=True, description="how many items to skip")
]
Words = Annotated[
    str | None,
    Field(
        min_length=1,
        max_length=200,
        description="only items holding every word of this (case ignored): a plain text "
        "filter, not a search",
    ),
]
Wait = Annotated[
    bool,
    Field(
        strict=True,
        description=f"true: block until the session is in memory (up to {WAIT_S:.0f} s) and "
        "return the finished job; false: return the queued job at once (follow it with get_job)",
    ),
]


class ProfileState(BaseModel):
    """One profile of a person in the version valid on the day asked for."""

    profile_id: str
    person: str
    content: str
    keywords: list[str]
    evidence_fact_ids: list[str]
    valid_from: date
    valid_to: date | None = Field(
        description="the first day it no longer held; null while it still holds"
    )

    @classmethod
    def of(cls, profile: Profile, version: Profile | ProfileVersion) -> ProfileState:
        return cls(
            profile_id=profile.id,
            person=profile.person,
            content=version.content,
            keywords=version.keywords,
            evidence_fact_ids=version.evidence_fact_ids,
            valid_from=version.t_from,
            valid_to=version.t_to if isinstance(version, ProfileVersion) else None,
        )


class Recalled(BaseModel):
    """A fact as a model reads it: what it says, how relevant, when, and where it came from."""

    fact_id: str
    text: str
    relevance: float = Field(description="0-1: how well it matches the question")
    when: str = Field(description="the day (or days) it happened, else the day it was said")
    session_id: str
    turn_ids: list[str]


class Said(BaseModel):
    """A turn of a session not yet processed into facts."""

    session_id: str
    turn_id: str
    speaker: str
    text: str
    time: datetime


class EventSummary(BaseModel):
    event_id: str
    summary: str


class Recall(BaseModel):
    """What `search` returns to a model: the facts, the profiles and events recall used, and
    what was said but not yet processed (the stages, timings and intent left out)."""

    people: list[str] = Field(description="the participants the question names")
    hits: list[Recalled] = Field(description="best first; empty when nothing is relevant")
    profiles: list[ProfileHit]
    events: list[EventSummary]
    pending: list[Said]

    @classmethod
    def of(cls, found: SearchResponse) -> Recall:
        return cls(
            people=found.intent.participants,
            hits=[
                Recalled(
                    fact_id=h.fact_id, text=h.text, relevance=round(h.relevance, 3),
                    when=days(h.time), session_id=h.session_id, turn_ids=h.turn_ids,
                )
                for h in found.hits
            ],
            profiles=found.profiles,
            events=[EventSummary(event_id=e.event_id, summary=e.summary) for e in found.events],
            pending=[
                Said(session_id=t.session_id, turn_id=t.turn_id, speaker=t.speaker,
                     text=t.text, time=t.time)
                for t in found.pending
            ],
        )  # fmt: skip


class Answered(Recall):
    """What `ask` returns to a model: the answer, what it cites, and the recall under it."""

    answer: str
    answer_fact_ids: list[str] = Field(
        description="fact ids; `profile:<id>` for a profile in force; `pending:...` for a turn"
    )

    @classmethod
    def of_answer(cls, found: AskResponse) -> Answered:
        recall = Recall.of(found)
        return cls(answer=found.answer, answer_fact_ids=found.answer_fact_ids, **dict(recall))


class Corrected(BaseModel):
    """What `correct_fact` returns to a model: the fact's text now and before, and the ids of
    what was rebuilt from it or that it supersedes."""

    fact_id: str
    text: str
    was: str | None = Field(description="the text it replaced; null when it already read so")
    events_rewritten: list[str]
    profiles_rewritten: list[str]
    profiles_deleted: list[str]
    superseded: list[str] = Field(
        description="other facts the corrected text supersedes, left as they are: correct or "
        "erase them too"
    )

    @classmethod
    def of(cls, receipt: CorrectionReceipt) -> Corrected:
        fact = receipt.fact
        was = fact.history[-1].text if receipt.changed else None
        return cls(
            fact_id=fact.id, text=fact.text, was=was, events_rewritten=receipt.events_rewritten,
            profiles_rewritten=receipt.profiles_rewritten,
            profiles_deleted=receipt.profiles_deleted, superseded=receipt.superseded,
        )  # fmt: skip


class PersonProfile(BaseModel):
    space: str
    person: str
    as_of: date | None = Field(description="the day asked for; null for the current versions")
    profiles: list[ProfileState]


def _memory(ctx: Context) -> Memory:
    server = ctx.mcp_server
    if not isinstance(server, MemoryServer):
        raise TypeError("AtomMem's tools run on a MemoryServer")
    return server.resolve(ctx)


async def _submitted(memory: Memory, space: str, session: SessionBody, wait: bool) -> Job:
    """Queue the session; with `wait`, until its job finishes."""
    job = await anyio.to_thread.run_sync(memory.add, space, session)
    (job,) = await _finished(memory, [job]) if wait else [job]
    return job


async def _finished(memory: Memory, jobs: list[Job]) -> list[Job]:
    """Poll the jobs until each finishes. The wait sleeps on the event loop and takes a thread
    only for each look at a job: a waiting call holds none of the threads the API's routes
    and the other tool calls run in."""
    deadline = anyio.current_time() + WAIT_S
    done: list[Job] = []
    for job in jobs:
        while job.state not in FINISHED:
            if anyio.current_time() > deadline:
                raise ToolError(
                    f"job {job.job_id} is still running after {WAIT_S:.0f}s; follow it with get_job"
                )
            await anyio.sleep(POLL_S)
            job = await anyio.to_thread.run_sync(memory.job, job.job_id)
        if job.state == "failed":
            raise ToolError(f"job {job.job_id} failed: {job.reason}")
        done.append(job)
    return done


def list_spaces(ctx: Context) -> SpaceList:
    """List this tenant's spaces with their counts of sessions, facts, events and profiles.
    Call it first to find the space to read or write."""
    return SpaceList(items=_memory(ctx).list_spaces())


def create_space(
    ctx: Context,
    name: Annotated[
        str,
        Field(pattern=SPACE_NAME, description="letters, digits, '.', '_', '-'; e.g. `alice`"),
    ],
) -> Space:
    """Create an empty space. Fails with `conflict` when the name is taken."""
    return _memory(ctx).create_space(name)


async def add_session(
    ctx: Context,
    space: SpaceArg,
    session: Annotated[
        SessionBody,
        Field(description="a finished conversation: id, start time, participants, turns"),
    ],
    wait: Wait = False,
) -> Job:
    """Add a finished conversation to a space: facts, events and profiles are built from it.
    Every turn's speaker must be one of `participants`. Adding the same session again changes
    nothing; the same `session_id` with other content is a `conflict`."""
    return await _submitted(_memory(ctx), space, session, wait)


async def add_messages(
    ctx: Context,
    space: SpaceArg,
    messages: Annotated[
        list[ChatMessage],
        Field(min_length=1, max_length=MAX_TURNS, description="the chat's messages in order"),
    ],
    conversation_id: Annotated[
        str | None, Field(description="names the conversation; its sessions' ids start with it")
    ] = None,
    user: Annotated[
        str | None, Field(description="who the user is, e.g. 'Priya' (default 'User')")
    ] = None,
    assistant: Annotated[
        str | None, Field(description="the assistant's name (default 'Assistant')")
    ] = None,
    wait: Wait = False,
) -> JobList:
    """Add a chat given as plain messages, `{role, content}` as a chat backend keeps them
    (`name` and `created_at` when known): user and assistant messages are remembered, a pause
    of over half an hour starts a new session. Sending the same messages again changes
    nothing."""
    memory = _memory(ctx)
    jobs = await anyio.to_thread.run_sync(
        lambda: memory.add_messages(space, messages, conversation_id, user, assistant)
    )
    return JobList(items=await _finished(memory, jobs) if wait else jobs)


def get_job(ctx: Context, job_id: ItemId) -> Job:
    """A queued session's job: its state (queued, extracting, committing, profiling, done or
    failed with the reason) and what it added."""
    return _memory(ctx).job(job_id)


def search(
    ctx: Context,
    space: SpaceArg,
    question: Question,
    k: K = None,
    mode: Mode = None,
    min_score: MinScore = None,
    filters: Filters = None,
    as_of: AsOf = None,
) -> Recall:
    """Search a space's memory: the facts that best match the question, ranked, each with its
    fact id, `relevance` (0-1), source session and turn ids, and the events and profiles
    recall used. An empty `hits` means memory holds nothing relevant."""
    query = QueryBody(
        question=question, k=k, mode=mode, min_score=min_score, filters=filters, as_of=as_of
    )
    return Recall.of(_memory(ctx).search(space, query.question, **query.recall()))


def ask(
    ctx: Context,
    space: SpaceArg,
    question: Question,
    k: K = None,
    mode: Mode = None,
    min_score: MinScore = None,
    filters: Filters = None,
    as_of: AsOf = None,
) -> Answered:
    """Answer a question from a space's memory: `answer`, the ids of the facts it rests on
    (`answer_fact_ids`), and the ranked evidence (`hits`, with turn ids)."""
    query = QueryBody(
        question=question, k=k, mode=mode, min_score=min_score, filters=filters, as_of=as_of
    )
    return Answered.of_answer(_memory(ctx).ask(space, query.question, **query.recall()))


def get_context(
    ctx: Context,
    space: SpaceArg,
    question: Question,
    max_tokens: Annotated[
        int, Field(ge=50, le=32_000, description="the block's budget in tokens (chars / 4)")
    ] = CONTEXT_TOKENS,
    min_score: MinScore = None,
    filters: Filters = None,
    as_of: AsOf = None,
) -> ContextResponse:
    """What memory holds for a question as a block to read before answering (`text`): the
    person's profiles in force, the relevant facts with their dates, the events they belong
    to and what was said but not yet processed, each line labelled [P1], [F1], [E1], [T1] to
    cite; `items` maps each label to its id. Prefer it to `search` to ground a reply."""
    body = ContextBody(
        question=question, max_tokens=max_tokens, min_score=min_score, filters=filters,
        as_of=as_of,
    )  # fmt: skip
    return _memory(ctx).context(space, body.question, body.max_tokens, **body.recall())


def get_profile(
    ctx: Context,
    space: SpaceArg,
    person: Annotated[str, Field(min_length=1, max_length=128, description="a participant")],
    as_of: Annotated[
        date | None,
        Field(description="a day (YYYY-MM-DD): each profile as it stood then; unset: now"),
    ] = None,
) -> PersonProfile:
    """A person's profiles (lasting traits: where they live, their work, their habits), each in
    the version valid on `as_of`, or the current one. A trait that changed keeps its earlier
    versions, so `as_of` answers 'where did she live in April?'."""
    profiles: list[Profile] = _memory(ctx).get_all(space, "profiles")
    wanted = person_name(person)  # the identity rule of every path: case counts
    theirs = sorted(
        (p for p in profiles if person_name(p.person) == wanted), key=lambda p: (p.t_from, p.id)
    )
    if not theirs:
        people = ", ".join(sorted({person_name(p.person) for p in profiles})) or "none yet"
        raise ToolError(
            f"not found: no profile of {person!r} in space {space!r} (people with profiles: "
            f"{people})"
        )
    states = []
    for profile in theirs:
        version = profile.version_at(as_of) if as_of is not None else profile
        if version is not None:
            states.append(ProfileState.of(profile, version))
    return PersonProfile(space=space, person=theirs[0].person, as_of=as_of, profiles=states)


def list_facts(
    ctx: Context, space: SpaceArg, limit: Limit = 50, offset: Offset = 0, text: Words = None
) -> Page[Fact]:
    """A page of a space's facts in session order (with `text`, only those holding every
    word of it), each with its source turns and earlier texts; `total` counts them all."""
    return _memory(ctx).page(space, "facts", limit, offset, _narrow(text))


def list_events(
    ctx: Context, space: SpaceArg, limit: Limit = 50, offset: Offset = 0, text: Words = None
) -> Page[Event]:
    """A page of a space's events in time order (with `text`, only those whose summary or
    keywords hold every word of it): facts grouped by the happening they describe."""
    return _memory(ctx).page(space, "events", limit, offset, _narrow(text))


def _narrow(text: str | None) -> ListingFilter | None:
    return None if text is None else ListingFilter(text=text)


def fact_history(ctx: Context, space: SpaceArg, fact_id: ItemId) -> FactHistory:
    """How a fact came to read as it does: its earlier texts, the session that replaced each,
    and the sessions and turns it was drawn from (provenance)."""
    return _memory(ctx).history(space, fact_id)


def erase_fact(ctx: Context, space: SpaceArg, fact_id: ItemId) -> ErasureReceipt:
    """Erase a fact for good, and rewrite the events and profiles built from it. Returns the
    ids of what was deleted or rewritten."""
    return _memory(ctx).delete(space, fact_id=fact_id)


def correct_fact(
    ctx: Context,
    space: SpaceArg,
    fact_id: ItemId,
    text: Annotated[
        str,
        Field(
            min_length=1,
            max_length=FACT_MAX,
            description="the fact as it should read: one self-contained statement",
            json_schema_extra={"pattern": NOT_BLANK},
        ),
    ],
    reason: Annotated[
        str | None, Field(max_length=500, description="why, kept in the fact's history")
    ] = None,
) -> Corrected:
    """Correct a fact's text when memory got it wrong. The new text is checked against the
    space's other facts (a `conflict` when another fact already says it), the old text stays
    in the fact's history, and its events and profiles are rebuilt. Sending the same
    correction again changes nothing."""
    return Corrected.of(_memory(ctx).correct_fact(space, fact_id, text, reason))


def erase_session(ctx: Context, space: SpaceArg, session_id: ItemId) -> ErasureReceipt:
    """Erase a session's contribution: its raw record, the facts only it supports, its updates
    to other facts (they get back their earlier state), and what was built from them."""
    return _memory(ctx).delete(space, session_id=session_id)


READ = ToolAnnotations(read_only_hint=True)
TOOLS: tuple[tuple[Callable[..., Any], ToolAnnotations], ...] = (
    (list_spaces, READ),
    (create_space, ToolAnnotations(read_only_hint=False, destructive_hint=False)),
    (add_session, ToolAnnotations(destructive_hint=False, idempotent_hint=True)),
    (add_messages, ToolAnnotations(destructive_hint=False, idempotent_hint=True)),
    (get_job, READ),
    (search, READ),
    (ask, READ),
    (get_context, READ),
    (get_profile, READ),
    (list_facts, READ),
    (list_events, READ),
    (fact_history, READ),
    (erase_fact, ToolAnnotations(destructive_hint=True, idempotent_hint=True)),
    (correct_fact, ToolAnnotations(destructive_hint=False, idempotent_hint=True)),
    (erase_session, ToolAnnotations(destructive_hint=True, idempotent_hint=True)),
)


class MemoryServer(MCPServer[Any]):
    """The tools, each acting on the `Memory` that `resolve` gives for its request."""

    def __init__(self, resolve: Resolve) -> None:
        # The SDK configures the root logger (its own handler) when it builds a server; the
        # host's logging (the API's, the CLI's) is put back as it was.
        root = logging.getLogger()
        handlers, level = list(root.handlers), root.level
        super().__init__("atommem", instructions=INSTRUCTIONS, version="0.1.0", log_level="WARNING")
        root.handlers[:] = handlers
        root.setLevel(level)
        self.resolve = resolve
        for tool, hints in TOOLS:
            described = " ".join((tool.__doc__ or "").split())  # the docstring, unwrapped
            self.add_tool(tool, description=described, annotations=hints)

    async def run_stdio_async(self) -> None:
        """The SDK's stdio transport, with every line it cannot read answered: the SDK drops
        such a line (a request holding a lone surrogate, a trailing NUL, garbage) and the
        client would wait for a reply that never comes."""
        async with stdio_server() as (read_stream, write_stream):
            relay_in, relayed = anyio.create_memory_object_stream[SessionMessage | Exception]()

            async def relay() -> None:
                async with relay_in:
                    async for item in read_stream:
                        if isinstance(item, Exception):
                            with contextlib.suppress(anyio.ClosedResourceError):
                                await write_stream.send(SessionMessage(unreadable(item)))
                        else:
                            await relay_in.send(item)

            async with anyio.create_task_group() as tasks:
                tasks.start_soon(relay)
                server = self._lowlevel_server
                await server.run(relayed, write_stream, server.create_initialization_options())
                tasks.cancel_scope.cancel()

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context | None = None
    ) -> CallToolResult | InputRequiredResult:
        """The SDK's call, with each expected failure put in words (`api.mcp.errors`)."""
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            why = explain(exc.__cause__)
            if why is None:
                raise
            raise ToolError(f"{name}: {why}") from exc.__cause__
