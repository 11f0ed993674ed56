"""The interface every LLM backend implements, one method per stage of the paper."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

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


class LLMBackend(Protocol):
    """Fact Executor, verifier, event, profile, intent and answer stages."""

    name: str

    def extract_facts(self, window: ExtractionWindow) -> list[ExtractedFact]:
        """Self-contained third-person facts from the window's turns."""
        ...

    def extract_facts_batch(self, windows: list[ExtractionWindow]) -> list[list[ExtractedFact]]:
        """`extract_facts` for every window of a task at once (one batch on a GPU)."""
        ...

    def fact_metadata(
        self, texts: list[str], speaker: str, participants: list[str], said_at: datetime
    ) -> list[FactMetadata]:
        """Participants, keywords, anchored time and a profile flag for each fact."""
        ...

    def fact_metadata_batch(self, groups: list[MetadataGroup]) -> list[list[FactMetadata]]:
        """`fact_metadata` for several speakers' facts at once."""
        ...

    def verify(self, new: FactView, candidates: list[FactView]) -> VerifyDecision:
        """Residual to store and conflict updates against close existing facts."""
        ...

    def link_event(self, new: FactView, similar: list[FactView]) -> list[str]:
        """Ids of the similar facts that describe the same happening as `new`."""
        ...

    def summarize_event(self, facts: list[FactView], previous: EventSummary | None) -> EventSummary:
        """Summary and keywords of an event from its member facts."""
        ...

    def summarize_events(
        self, items: list[tuple[list[FactView], EventSummary | None]]
    ) -> list[EventSummary]:
        """`summarize_event` for independent events at once."""
        ...

    def profile_candidates(self, facts: list[FactView]) -> list[ProfileCandidate]:
        """Lasting traits stated by pending facts."""
        ...

    def update_profile(
        self, candidate: ProfileCandidate, existing: list[ProfileView]
    ) -> ProfileDecision:
        """Redundant, update the current version, modify a historical one, or create."""
        ...

    def query_intent(self, question: str, participants: list[str], now: datetime) -> QueryIntent:
        """Who and when a question is about, its keywords and whether profiles help."""
        ...

    def answer(self, question: str, intent: QueryIntent, evidence: list[EvidenceItem]) -> Answer:
        """An answer from the evidence, citing the facts it used."""
        ...
