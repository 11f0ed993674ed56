"""A backend per role: fact extraction on one backend, every other stage on another.

`llm.extractor_backend` and `llm.general_backend` choose them (workers/wiring.py builds
this); each role's calls keep their own backend's retries, budgets and token accounting.
"""

from __future__ import annotations

from datetime import datetime

from common.llm.base import LLMBackend
from common.llm.contracts import (
    Answer,
    EventSummary,
    EvidenceItem,
    ExtractedFact,
    ExtractionWindow,
    FactMetadata,
    FactView,
    MetadataGroup,
    ProfileCandidate,
    ProfileDecision,
    ProfileView,
    QueryIntent,
    VerifyDecision,
)
from common.llm.transport import LLMError


class RoleBackend:
    """`extract_facts` and `extract_facts_batch` go to `extractor`, the rest to `general`."""

    def __init__(self, name: str, extractor: LLMBackend, general: LLMBackend) -> None:
        self.name = name
        self.extractor = extractor
        self.general = general

    def extract_facts(self, window: ExtractionWindow) -> list[ExtractedFact]:
        return self.extractor.extract_facts(window)

    def extract_facts_batch(self, windows: list[ExtractionWindow]) -> list[list[ExtractedFact]]:
        return self.extractor.extract_facts_batch(windows)

    def fact_metadata(
        self, texts: list[str], speaker: str, participants: list[str], said_at: datetime
    ) -> list[FactMetadata]:
        return self.general.fact_metadata(texts, speaker, participants, said_at)

    def fact_metadata_batch(self, groups: list[MetadataGroup]) -> list[list[FactMetadata]]:
        return self.general.fact_metadata_batch(groups)

    def verify(self, new: FactView, candidates: list[FactView]) -> VerifyDecision:
        return self.general.verify(new, candidates)

    def link_event(self, new: FactView, similar: list[FactView]) -> list[str]:
        return self.general.link_event(new, similar)

    def summarize_event(self, facts: list[FactView], previous: EventSummary | None) -> EventSummary:
        return self.general.summarize_event(facts, previous)

    def summarize_events(
        self, items: list[tuple[list[FactView], EventSummary | None]]
    ) -> list[EventSummary]:
        return self.general.summarize_events(items)

    def profile_candidates(self, facts: list[FactView]) -> list[ProfileCandidate]:
        return self.general.profile_candidates(facts)

    def update_profile(
        self, candidate: ProfileCandidate, existing: list[ProfileView]
    ) -> ProfileDecision:
        return self.general.update_profile(candidate, existing)

    def query_intent(self, question: str, participants: list[str], now: datetime) -> QueryIntent:
        return self.general.query_intent(question, participants, now)

    def answer(self, question: str, intent: QueryIntent, evidence: list[EvidenceItem]) -> Answer:
        return self.general.answer(question, intent, evidence)

    def judge(self, question: str, gold: str, generated: str) -> bool:
        """The benchmark's judge, a general-role stage (only a model backend has one)."""
        judge = getattr(self.general, "judge", None)
        if judge is None:
            raise LLMError(
                f"the judge runs on the general role, and {self.general.name!r} has none: "
                "set ATOMMEM_LLM__GENERAL_BACKEND=openai"
            )
        return bool(judge(question, gold, generated))
