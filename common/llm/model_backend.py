"""The LLM-driven backend: each stage's prompt, sent through a transport, parsed and validated.

`openai` and `vllm` differ only in the transport of the `extractor` role (HTTP, or the
in-process engine); everything else is here. Retries happen in one place, `_run`: a call
that times out, is rate-limited, gets a 5xx, or returns output that does not parse into the
stage's response model is tried again, up to `llm.max_attempts` in all, with doubling
waits; after the last try an `LLMError` says which stage failed and why, and the job that
made the call fails with that reason before anything of it is committed. A call the server
still rate-limits (429) after the last try is backpressure, not a failure: `BudgetShort`
re-queues the task (common/llm/budget.py). So is an endpoint that keeps failing transiently
(5xx, timeouts, connections) for less than `llm.outage_s`: `ModelUnavailable` re-queues the
task with a growing countdown; past that bound the call fails for good. Inside `keeping`
(an extract task) every call that succeeds is kept as it returns and replayed when the task
runs again, so a call that went through is never paid for twice.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import date, datetime
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from common.llm import budget, usage
from common.llm.budget import shortage, unavailable
from common.llm.contracts import (
    Answer,
    EventSummary,
    EvidenceItem,
    ExtractedFact,
    ExtractionWindow,
    FactMetadata,
    FactUpdate,
    FactView,
    MetadataGroup,
    ProfileCandidate,
    ProfileDecision,
    ProfileView,
    QueryIntent,
    VerifyDecision,
)
from common.llm.prompts import (
    answer,
    event_link,
    event_summary,
    extract,
    intent,
    judge,
    metadata,
    profile_extract,
    profile_update,
    verify,
)
from common.llm.transport import ChatRequest, Completion, LLMError, Transport
from common.models.memory import TimeRange
from common.settings import LLMSettings, MemorySettings
from common.text.keywords import normalize_keywords
from common.text.timeanchor import find_mentions

T = TypeVar("T")
# The longest a task waits before it tries an endpoint that keeps failing again.
OUTAGE_RETRY_MAX_S = 30.0
M = TypeVar("M", bound=BaseModel)
_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.S)


def decode(completion: Completion, model: type[M]) -> M:
    """The completion's JSON as `model`; ValueError when it is cut off or malformed."""
    if completion.finish_reason == "length":
        raise ValueError("output cut off at max_tokens")
    text = _FENCE.sub("", completion.text.strip())
    return model.model_validate(json.loads(text, strict=False))


def day_range(start: str, end: str) -> TimeRange | None:
    """A model's YYYY-MM-DD pair as a range; None for empty or unparseable dates."""
    try:
        first = date.fromisoformat(start.strip())
    except ValueError:
        return None
    try:
        last = date.fromisoformat(end.strip()) if end.strip() else first
    except ValueError:
        last = first
    return TimeRange(start=min(first, last), end=max(first, last))


def _unique(found: list[str]) -> str | None:
    """The first of `found`, unless another differs from it only in case (two people)."""
    if not found:
        return None
    first = found[0]
    return None if any(p != first and p.lower() == first.lower() for p in found) else first


def _person(name: str, known: Sequence[str]) -> str | None:
    """The participant a model's `name` means: spelled exactly so, else the one it matches
    ignoring case, else the one it contains; None when case alone would have to choose
    between two participants ("Ann" and "ann" are two people, common/models/names.py)."""
    name = name.strip()
    if name in known:
        return name
    folded = [p for p in known if p.lower() == name.lower()]
    if folded:
        return _unique(folded)
    # "Caroline Smith" or "caroline's" for "Caroline"
    inside = [p for p in known if p in name]
    if inside:
        return inside[0]
    return _unique([p for p in known if p.lower() in name.lower()])


def _people(named: Sequence[str], known: Sequence[str]) -> list[str]:
    """The named people that are known participants, spelled as the participant list does."""
    out: list[str] = []
    for name in named:
        match = _person(name, known)
        if match is not None and match not in out:
            out.append(match)
    return out


def call_digest(request: ChatRequest, endpoint: str = "") -> str:
    """A call's identity: the endpoint that answers it (`model@base_url`, so a model changed
    meanwhile is asked again), its stage, prompt and answer's schema (the same call, the same
    answer: temperature 0 and a fixed seed)."""
    body = [endpoint, request.stage, request.messages, request.schema_name, request.max_tokens]
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:32]


def _endpoint(transport: Transport) -> str:
    """Which model answers `transport`'s calls: its `endpoint` (`model@base_url`) where it
    has one, else its name (an in-process engine)."""
    return str(getattr(transport, "endpoint", transport.name))


@dataclass(frozen=True)
class KeptCalls:
    """Calls a task made before (digest → answer) and where each new answer is kept."""

    found: Mapping[str, str]
    park: Callable[[str, str], None]


_KEPT: ContextVar[KeptCalls | None] = ContextVar("atommem_kept_calls", default=None)


@contextmanager
def keeping(kept: KeptCalls) -> Iterator[None]:
    """Replay the calls in `kept` and keep every call that succeeds, in this thread."""
    token = _KEPT.set(kept)
    try:
        yield
    finally:
        _KEPT.reset(token)


KEPT_FIELDS = ("text", "prompt_tokens", "completion_tokens", "finish_reason")


def _kept(stage: str, done: Completion) -> str:
    return json.dumps({"stage": stage} | {name: getattr(done, name) for name in KEPT_FIELDS})


def _pick(number: int, items: Sequence[T]) -> T | None:
    return items[number - 1] if 1 <= number <= len(items) else None


class ModelBackend:
    """Every stage of the paper through prompts; see `common/llm/prompts`."""

    def __init__(
        self,
        name: str,
        llm: LLMSettings,
        memory: MemorySettings,
        extractor: Transport,
        general: Transport,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.name = name
        self._llm = llm
        self._memory = memory
        self._extractor = extractor
        self._general = general
        self._sleep = sleep

    # --- the one retry loop -----------------------------------------------------------------

    def _run(
        self,
        transport: Transport,
        requests: list[ChatRequest],
        parse: Callable[[int, Completion], T],
    ) -> list[T]:
        """Send a batch; retry the calls that failed or returned invalid output. Calls kept
        from an earlier run of the task (`keeping`) are replayed, not sent, and each call
        that succeeds now is kept."""
        results: dict[int, T] = {}
        errors: dict[int, str] = {}
        throttled: set[int] = set()
        failing: dict[int, float | None] = {}  # transient transport failures: since when
        kept = _KEPT.get()
        where = _endpoint(transport)
        digests = [call_digest(r, where) for r in requests] if kept is not None else []
        pending = [
            i
            for i in range(len(requests))
            if kept is None or not self._replayed(kept, digests[i], requests[i], i, parse, results)
        ]
        if not pending:
            return [results[i] for i in range(len(requests))]
        role = transport.name.rsplit(":", 1)[-1]
        deadline = budget.deadline()
        first_failed: float | None = None  # this run's first transient failure
        for attempt in range(1, self._llm.max_attempts + 1):
            completions = transport.complete([requests[i] for i in pending])
            retry: list[int] = []
            wait = self._llm.backoff_s * 2 ** (attempt - 1)
            short: tuple[str, float] | None = None  # the endpoint whose budget stayed short
            for i, done in zip(pending, completions, strict=True):
                stage = requests[i].stage
                throttled.discard(i)
                failing.pop(i, None)
                if done.short is not None:  # never sent: the budget stayed short
                    short = (str(done.extra.get("endpoint", transport.name)), done.short)
                    continue
                usage.endpoint(role, done)
                if done.error is not None:
                    if not done.retryable:
                        raise LLMError(f"LLM stage {stage!r} failed: {done.error}")
                    errors[i] = done.error
                    wait = max(wait, done.retry_after or 0.0)
                    retry.append(i)
                    if done.throttled:
                        throttled.add(i)
                    else:
                        failing[i] = done.failing_since
                        first_failed = first_failed or time.time()
                    continue
                usage.record(stage, done.prompt_tokens, done.completion_tokens)
                try:
                    results[i] = parse(i, done)
                except (ValueError, ValidationError) as exc:
                    errors[i] = f"invalid output: {str(exc).splitlines()[0][:200]}"
                    retry.append(i)
                    continue
                if kept is not None:
                    kept.park(digests[i], _kept(stage, done))
            if short is not None:  # what went through is kept; the task comes back for the rest
                raise shortage(*short)
            pending = retry
            if not pending:
                return [results[i] for i in range(len(requests))]
            if attempt < self._llm.max_attempts:
                if deadline is not None and time.time() + wait >= deadline:
                    # a question whose caller stops waiting before the next try could end
                    raise budget.caller_gone(transport.name)
                self._sleep(wait)
        first = pending[0]
        tries = f"after {self._llm.max_attempts} tries"
        spells = {i: failing[i] for i in pending if failing.get(i) is not None}
        if all(i in throttled or i in spells for i in pending):
            # Backpressure, not a failure: the server asks us to slow down (429), or the
            # endpoint is down (5xx, timeouts) for some of the calls and throttles the rest.
            if not spells:
                raise shortage(transport.name, wait)
            first = next(i for i in pending if i in spells)
            now = time.time()
            down_s = max(0.0, now - min(s for s in spells.values() if s is not None))
            # The task's own failing time is bounded too: a prompt that always fails while
            # other calls succeed keeps ending the endpoint's spell, never the task's.
            since = budget.task_failing_since() or first_failed or now
            own_s = max(0.0, now - since)
            if max(down_s, own_s) < self._llm.outage_s:
                retry_in = min(OUTAGE_RETRY_MAX_S, max(wait, down_s / 2, own_s / 2))
                raise unavailable(transport.name, retry_in, down_s, errors[first], since)
            spell = max(down_s, own_s)
            tries += f" and {spell:.0f} s of outage (llm.outage_s {self._llm.outage_s:g})"
        raise LLMError(f"LLM stage {requests[first].stage!r} failed {tries}: {errors[first]}")

    @staticmethod
    def _replayed(
        kept: KeptCalls,
        digest: str,
        request: ChatRequest,
        i: int,
        parse: Callable[[int, Completion], T],
        results: dict[int, T],
    ) -> bool:
        """Whether the call's kept answer stands in for it (counted as a call once more:
        the run that made it was given back and its counts with it)."""
        raw = kept.found.get(digest)
        if raw is None:
            return False
        try:
            body = json.loads(raw)
            done = Completion(**{name: body[name] for name in KEPT_FIELDS})
            results[i] = parse(i, done)
        except (ValueError, TypeError, KeyError, ValidationError):
            return False  # not a usable answer: the call is sent
        usage.record(request.stage, done.prompt_tokens, done.completion_tokens)
        usage.replayed(request.stage)
        return True

    def _one(self, transport: Transport, request: ChatRequest, model: type[M]) -> M:
        return self._run(transport, [request], lambda _, done: decode(done, model))[0]

    def _tokens(self) -> int:
        return self._llm.max_tokens

    # --- extraction ---------------------------------------------------------------------------

    def extract_facts(self, window: ExtractionWindow) -> list[ExtractedFact]:
        return self.extract_facts_batch([window])[0]

    def extract_facts_batch(self, windows: list[ExtractionWindow]) -> list[list[ExtractedFact]]:
        """Every window of a task in one batch (the vLLM engine generates them together)."""
        if not windows:
            return []
        requests = [extract.request(w, self._tokens()) for w in windows]

        def parse(i: int, done: Completion) -> list[ExtractedFact]:
            turn_id = windows[i].turns[-1].id or ""
            texts = decode(done, extract.Response).facts
            return [ExtractedFact(text=t.strip(), turn_ids=[turn_id]) for t in texts if t.strip()]

        return self._run(self._extractor, requests, parse)

    def fact_metadata(
        self, texts: list[str], speaker: str, participants: list[str], said_at: datetime
    ) -> list[FactMetadata]:
        group = MetadataGroup(
            texts=texts, speaker=speaker, participants=participants, said_at=said_at
        )
        return self.fact_metadata_batch([group])[0]

    def fact_metadata_batch(self, groups: list[MetadataGroup]) -> list[list[FactMetadata]]:
        """Every group's facts, asked about `llm.metadata_batch` at a time (a bounded answer
        per call), all slices in one batch."""
        size = self._llm.metadata_batch
        slices = [
            (g, group.model_copy(update={"texts": group.texts[i : i + size]}))
            for g, group in enumerate(groups)
            for i in range(0, len(group.texts), size)
        ]
        requests = [
            metadata.request(s.texts, s.speaker, s.participants, s.said_at, self._tokens())
            for _, s in slices
        ]

        def parse(i: int, done: Completion) -> list[FactMetadata]:
            part = slices[i][1]
            items = decode(done, metadata.Response).items
            if len(items) != len(part.texts):
                raise ValueError(f"{len(items)} metadata items for {len(part.texts)} facts")
            pairs = zip(part.texts, items, strict=True)
            return [self._metadata(text, item, part) for text, item in pairs]

        out: list[list[FactMetadata]] = [[] for _ in groups]
        for (g, _), metas in zip(slices, self._run(self._general, requests, parse), strict=True):
            out[g].extend(metas)
        return out

    def _metadata(self, text: str, item: metadata.Item, group: MetadataGroup) -> FactMetadata:
        span = day_range(item.start, item.end)
        if span is None:  # the model named no usable date: the deterministic anchor may
            mentions = find_mentions(text, group.said_at.date())
            span = mentions[0].span if mentions else None
        names = group.participants
        return FactMetadata(
            participants=_people(item.people, names) or [group.speaker],
            keywords=normalize_keywords(item.keywords, names)[: self._memory.max_keywords],
            event_time=span,
            profile_worthy=item.lasting,
        )

    # --- verification and events ----------------------------------------------------------

    def verify(self, new: FactView, candidates: list[FactView]) -> VerifyDecision:
        request = verify.request(new, candidates, self._tokens())
        out = self._one(self._general, request, verify.Response)
        updates = []
        for update in out.updates:
            target = _pick(update.number, candidates)
            if target is not None:
                updates.append(FactUpdate(fact_id=target.id, text=update.text.strip()))
        residual = out.residual.strip() or None
        return VerifyDecision(store=out.store, residual=residual, updates=updates)

    def link_event(self, new: FactView, similar: list[FactView]) -> list[str]:
        request = event_link.request(new, similar, self._tokens())
        out = self._one(self._general, request, event_link.Response)
        picked = (_pick(n, similar) for n in out.same)
        return list(dict.fromkeys(p.id for p in picked if p is not None))

    def summarize_event(self, facts: list[FactView], previous: EventSummary | None) -> EventSummary:
        return self.summarize_events([(facts, previous)])[0]

    def summarize_events(
        self, items: list[tuple[list[FactView], EventSummary | None]]
    ) -> list[EventSummary]:
        """Independent summaries, sent as one batch."""
        requests = [event_summary.request(f, p, self._tokens()) for f, p in items]

        def parse(i: int, done: Completion) -> EventSummary:
            out = decode(done, event_summary.Response)
            names = sorted({p for f in items[i][0] for p in f.participants})
            keywords = normalize_keywords(out.keywords, names)
            return EventSummary(summary=out.summary.strip(), keywords=keywords)

        return self._run(self._general, requests, parse)

    # --- profiles -------------------------------------------------------------------------

    def profile_candidates(self, facts: list[FactView]) -> list[ProfileCandidate]:
        request = profile_extract.request(facts, self._tokens())
        out = self._one(self._general, request, profile_extract.Response)
        candidates = []
        for trait in out.traits:
            fact = _pick(trait.number, facts)
            if fact is None:
                continue
            person = _people([trait.person], fact.participants)
            if not person:
                continue
            candidates.append(
                ProfileCandidate(
                    person=person[0],
                    content=trait.trait.strip(),
                    keywords=normalize_keywords(trait.keywords, fact.participants) or fact.keywords,
                    fact_id=fact.id,
                    valid_from=fact.time.trait_start(),
                )
            )
        return candidates

    def update_profile(
        self, candidate: ProfileCandidate, existing: list[ProfileView]
    ) -> ProfileDecision:
        request = profile_update.request(candidate, existing, self._tokens())
        out = self._one(self._general, request, profile_update.Response)
        target = _pick(out.number, existing)
        text = out.text.strip() or candidate.content
        if out.action == "create" or target is None:
            return ProfileDecision(action="create", content=candidate.content)
        return ProfileDecision(action=out.action, profile_id=target.id, content=text)

    # --- queries --------------------------------------------------------------------------

    def query_intent(self, question: str, participants: list[str], now: datetime) -> QueryIntent:
        request = intent.request(question, participants, now, self._tokens())
        out = self._one(self._general, request, intent.Response)
        return QueryIntent(
            needs_profile=out.profile,
            participants=_people(out.people, participants),
            keywords=normalize_keywords([*out.keywords, question], participants),
            time_range=day_range(out.start, out.end),
            style=out.style,
        )

    def answer(self, question: str, intent: QueryIntent, evidence: list[EvidenceItem]) -> Answer:
        if not evidence:
            usage.skipped(answer.STAGE)
            return Answer(text="Memory does not say: nothing relevant is stored.", fact_ids=[])
        request = answer.request(question, intent.style, evidence, self._tokens())
        out = self._one(self._general, request, answer.Response)
        used = (_pick(n, evidence) for n in out.evidence)
        return Answer(
            text=out.answer.strip(),
            fact_ids=list(dict.fromkeys(e.fact_id for e in used if e is not None)),
        )

    def judge(self, question: str, gold: str, generated: str) -> bool:
        request = judge.request(question, gold, generated, self._tokens())
        return self._one(self._general, request, judge.Response).verdict == "CORRECT"
