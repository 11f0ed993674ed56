"""The offline `rules` backend: deterministic, no model, honest about being weaker than an LLM.

Its facts come from `rules_extract` (sentences that name their speaker, anchored against the
session day); it decides verification, event links and profile changes by similarity
thresholds and a few patterns. It never claims to be the paper's Fact Executor.
"""

from __future__ import annotations

import re
from collections import Counter
from datetime import datetime
from typing import Literal

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
from common.llm.rules_extract import extract_window, statement
from common.settings import MemorySettings, RulesSettings
from common.text.keywords import extract_keywords, normalize_keywords
from common.text.timeanchor import describe, find_mentions

ASPECTS: dict[str, re.Pattern[str]] = {
    "preference": re.compile(
        r"\b(likes?|loves?|enjoys?|prefers?|hates?|dislikes?|fan of|favou?rite|passionate|"
        r"interested in|into)\b"
    ),
    "occupation": re.compile(
        r"\b(works? (as|at|for|in)|employed|job|career|profession|business)\b"
    ),
    "residence": re.compile(r"\b(lives? in|moved to|is from|grew up|hometown|relocat\w+)\b"),
    "family": re.compile(
        r"\b(married|husband|wife|partner|kids?|children|sons?|daughters?|mother|father|mom|dad|"
        r"sister|brother|family|grandma|grandmother|grandpa|grandfather)\b"
    ),
    "pet": re.compile(r"\b(dogs?|cats?|pets?|pupp(y|ies)|kittens?)\b"),
    "identity": re.compile(
        r"\b(transgender|trans woman|trans man|gay|lesbian|queer|vegan|vegetarian|religio\w+|"
        r"christian|muslim|jewish|single|divorced)\b"
    ),
    "hobby": re.compile(
        r"\b(hobby|hobbies|plays?|painting|paints|writes|writing|reading|runs|running|hikes|"
        r"hiking|cooks|cooking|volunteers?|volunteering|pottery|camping|music|guitar|piano)\b"
    ),
    "goal": re.compile(
        r"\b(plans? to|wants? to|dreams? of|goals?|aspires?|hopes? to|studying|studies|saving up|"
        r"wishes to|intends? to)\b"
    ),
    "health": re.compile(r"\b(allergic|diagnosed|condition|diet|injur\w+|illness|therapy)\b"),
}

# The aspects a person holds one value of at a time, as a fact states them (a profile slot):
# where they live now, and not where they come from.
_SLOTS: dict[str, re.Pattern[str]] = {
    "residence": re.compile(r"\b(lives? in|moved to|relocated to)\b"),
}

_TEMPORAL_Q = re.compile(
    r"^\s*(when\b|what (year|month|day|date|time)\b|how long\b|which (year|month|day)\b|"
    r"how many (days|weeks|months|years)\b)",
    re.I,
)
_OPEN_Q = re.compile(r"\b(would|likely|might|could|probably|think|consider|guess|why)\b", re.I)
_PROFILE_Q = re.compile(
    r"\b(personality|kind of person|like|likes|prefer|favou?rite|hobb(y|ies)|interests?|values?|"
    r"identity|job|career|work|live|pets?|family|would|likely)\b",
    re.I,
)


def _names_in(text: str, names: list[str]) -> list[str]:
    """Known names mentioned in `text`, by whole first-name or full-name tokens."""
    lowered = text.lower()
    found = []
    for name in names:
        tokens = {name.lower(), name.split()[0].lower()}
        if any(re.search(rf"\b{re.escape(t)}\b", lowered) for t in tokens):
            found.append(name)
    return found


def aspect_of(text: str) -> str | None:
    lowered = text.lower()
    for aspect, pattern in ASPECTS.items():
        if pattern.search(lowered):
            return aspect
    return None


def _slot(aspect: str, text: str) -> str | None:
    """`aspect` when the fact states it as a slot, one value at a time."""
    pattern = _SLOTS.get(aspect)
    return aspect if pattern is not None and pattern.search(text.lower()) else None


def _subject(text: str, names: list[str]) -> str | None:
    """The participant a fact is about: the one named first, if the sentence starts with it."""
    first = None
    first_pos = len(text)
    for name in names:
        for token in {name, name.split()[0]}:
            m = re.search(rf"\b{re.escape(token)}\b", text)
            if m and m.start() < first_pos:
                first, first_pos = name, m.start()
    return first if first is not None and first_pos <= 3 else None


class RulesBackend:
    """Deterministic stand-in for the LLM stages; the embedded default and the test backbone."""

    name = "rules"

    def __init__(self, rules: RulesSettings, memory: MemorySettings) -> None:
        self._rules = rules
        self._memory = memory

    # --- extraction -------------------------------------------------------------------------

    def extract_facts(self, window: ExtractionWindow) -> list[ExtractedFact]:
        return extract_window(window, self._rules)

    def extract_facts_batch(self, windows: list[ExtractionWindow]) -> list[list[ExtractedFact]]:
        return [self.extract_facts(w) for w in windows]

    def fact_metadata_batch(self, groups: list[MetadataGroup]) -> list[list[FactMetadata]]:
        return [self.fact_metadata(g.texts, g.speaker, g.participants, g.said_at) for g in groups]

    def fact_metadata(
        self, texts: list[str], speaker: str, participants: list[str], said_at: datetime
    ) -> list[FactMetadata]:
        out = []
        for text in texts:
            said = statement(text)  # about its subject, not the question it answers
            people = _names_in(said, participants) or [speaker]
            # a time the answer leaves to the question ("What did you do last weekend?")
            mentions = find_mentions(said, said_at.date()) or find_mentions(text, said_at.date())
            subject = _subject(said, participants)
            out.append(
                FactMetadata(
                    participants=people,
                    keywords=extract_keywords(text, participants, self._memory.max_keywords),
                    event_time=mentions[0].span if mentions else None,
                    profile_worthy=subject is not None and aspect_of(said) is not None,
                )
            )
        return out

    # --- verification and events ------------------------------------------------------------

    def verify(self, new: FactView, candidates: list[FactView]) -> VerifyDecision:
        """Replace a close fact about the same person and aspect when the new one is later."""
        aspect = aspect_of(statement(new.text))
        subject = _subject(new.text, new.participants)
        if aspect is None or subject is None:
            return VerifyDecision()
        for cand in candidates:
            if (cand.score or 0.0) < self._rules.conflict_threshold:
                continue
            if (
                aspect_of(statement(cand.text)) != aspect
                or _subject(cand.text, cand.participants) != subject
            ):
                continue
            if cand.time.session < new.time.session:
                return VerifyDecision(
                    store=False, updates=[FactUpdate(fact_id=cand.id, text=new.text)]
                )
        return VerifyDecision()

    def link_event(self, new: FactView, similar: list[FactView]) -> list[str]:
        window = self._rules.event_time_window_days
        new_span = new.time.effective()
        chosen = []
        for cand in similar:
            if (cand.score or 0.0) < self._rules.event_link_threshold:
                continue
            span = cand.time.effective()
            gap = max((span.start - new_span.end).days, (new_span.start - span.end).days, 0)
            if gap <= window:
                chosen.append(cand.id)
        return chosen

    def summarize_event(self, facts: list[FactView], previous: EventSummary | None) -> EventSummary:
        ordered = sorted(facts, key=lambda f: (f.time.effective().start, f.time.session))
        lead = ordered[:3]
        summary = " ".join(f.text for f in lead)[: self._rules.max_fact_chars]
        counts = Counter(kw for f in ordered for kw in f.keywords)
        first_seen = {
            kw: i for i, kw in reversed(list(enumerate(kw for f in ordered for kw in f.keywords)))
        }
        keywords = sorted(counts, key=lambda kw: (-counts[kw], first_seen[kw]))
        return EventSummary(
            summary=summary,
            keywords=keywords[: self._memory.max_keywords + 1],
            sources=[f.id for f in lead],
        )

    def summarize_events(
        self, items: list[tuple[list[FactView], EventSummary | None]]
    ) -> list[EventSummary]:
        return [self.summarize_event(facts, previous) for facts, previous in items]

    # --- profiles ---------------------------------------------------------------------------

    def profile_candidates(self, facts: list[FactView]) -> list[ProfileCandidate]:
        out = []
        for fact in facts:
            said = statement(fact.text)  # a trait, not the question that drew it out
            subject = _subject(said, fact.participants)
            aspect = aspect_of(said)
            if subject is None or aspect is None:
                continue
            out.append(
                ProfileCandidate(
                    person=subject,
                    content=said,
                    keywords=fact.keywords,
                    fact_id=fact.id,
                    valid_from=fact.time.trait_start(),
                    slot=_slot(aspect, said),
                )
            )
        return out

    def update_profile(
        self, candidate: ProfileCandidate, existing: list[ProfileView]
    ) -> ProfileDecision:
        aspect = aspect_of(candidate.content)
        for view in existing:
            if view.score < self._rules.profile_match_threshold:
                break
            if aspect_of(view.content) != aspect:
                continue
            if candidate.valid_from >= view.t_from:
                return ProfileDecision(
                    action="update_current", profile_id=view.id, content=candidate.content
                )
            return ProfileDecision(
                action="modify_history", profile_id=view.id, content=candidate.content
            )
        return ProfileDecision(action="create", content=candidate.content)

    # --- queries ----------------------------------------------------------------------------

    def query_intent(self, question: str, participants: list[str], now: datetime) -> QueryIntent:
        mentions = find_mentions(question, now.date())
        temporal = bool(_TEMPORAL_Q.search(question))
        open_domain = not temporal and bool(_OPEN_Q.search(question))
        style: Literal["factual", "temporal", "open"] = (
            "temporal" if temporal else "open" if open_domain else "factual"
        )
        return QueryIntent(
            needs_profile=open_domain or bool(_PROFILE_Q.search(question)),
            participants=_names_in(question, participants),
            keywords=normalize_keywords([question], participants),
            time_range=mentions[0].span if mentions else None,
            style=style,
        )

    def answer(self, question: str, intent: QueryIntent, evidence: list[EvidenceItem]) -> Answer:
        """Extractive: the best evidence itself, or its date for a 'when' question."""
        if not evidence:
            return Answer(text="I don't know: nothing in memory answers this.", fact_ids=[])
        top = evidence[: self._rules.answer_max_facts]
        best = top[0]
        if best.in_force_since is not None:  # the state in force then answers on its own
            return Answer(text=best.text, fact_ids=[best.fact_id])
        if intent.style == "temporal" and best.time is not None:
            span = best.time.effective()
            return Answer(text=f"{describe(span)} ({best.text})", fact_ids=[best.fact_id])
        return Answer(text=" ".join(e.text for e in top), fact_ids=[e.fact_id for e in top])
