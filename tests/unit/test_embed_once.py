"""Each commit stage embeds what it needs in as few batches as it can, and never re-embeds a
text whose vector the space already holds."""

from __future__ import annotations

import hashlib
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest

from common.context import MemoryContext
from common.llm.contracts import (
    FactUpdate,
    FactView,
    ProfileCandidate,
    ProfileDecision,
    ProfileView,
    VerifyDecision,
)
from common.llm.rules import RulesBackend
from common.memory.changes import Changes, CommitStats
from common.memory.commit import commit_facts, profile_batch
from common.memory.events import refresh_events
from common.models.drafts import DraftFact
from common.models.session import SessionRecord
from common.settings import Settings
from common.similarity import TextQuery
from common.store.base import Kind
from tests.helpers.contexts import make_ctx
from tests.helpers.doubles import DIM, TableEncoder, unit
from tests.helpers.records import draft, session_record

WHEN = datetime(2024, 3, 1, 12, 0)
# Fact vectors far enough apart that no fact is a duplicate of another; every other text
# gets a vector of its own from its hash.
FACTS = {
    "Ann paints landscapes.": unit(1, 0, 0, 0),
    "Ann bought paint brushes.": unit(0.7, 0.7, 0, 0),
    "Ann framed a painting.": unit(0.5, 0.5, 0.7, 0),
    "Bob grinds flour.": unit(0, 0, 0, 1),
    "Bob bakes sourdough.": unit(0, 0.6, 0, 0.8),
    "Ann lives in Boston.": unit(1, 0, 0, 0),
    "Ann owns a cat.": unit(0, 1, 0, 0),
    "Ann drives a van.": unit(0, 0, 1, 0),
    "Ann moved to Denver with her new dog.": unit(0.5, 0.5, 0.5, 0.5),
    "Ann sails boats.": unit(1, 0, 0, 0),
    "Ann plays chess.": unit(0, 1, 0, 0),
}


class CountingEncoder(TableEncoder):
    """Table vectors where given, else a distinct vector per text; records every batch."""

    def __init__(self, table: dict[str, np.ndarray] | None = None) -> None:
        super().__init__(table)
        self.batches: list[list[str]] = []

    def single(self, text: str) -> np.ndarray:
        """What encoding `text` on its own gives."""
        if text in self.table:
            return self.table[text]
        seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big")
        return unit(*np.random.default_rng(seed).normal(size=DIM))

    def encode(self, texts: list[str]) -> np.ndarray:
        self.calls += 1
        self.batches.append(list(texts))
        rows = [self.single(t) for t in texts]
        return np.stack(rows) if rows else np.zeros((0, DIM), dtype=np.float32)


class ProfileWriter(RulesBackend):
    """A model-like profile writer: one candidate per fact, worded unlike the fact, and
    decisions that create a profile worded as `rewrite` says."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings.rules, settings.memory)
        self.rewrite: dict[str, str] = {}
        self.seen: list[tuple[str, list[ProfileView]]] = []

    def profile_candidates(self, facts: list[FactView]) -> list[ProfileCandidate]:
        return [
            ProfileCandidate(
                person=f.participants[0],
                content=f"{f.participants[0]}: {f.text}",
                keywords=f.keywords,
                fact_id=f.id,
                valid_from=f.time.trait_start(),
            )
            for f in facts
        ]

    def update_profile(
        self, candidate: ProfileCandidate, existing: list[ProfileView]
    ) -> ProfileDecision:
        self.seen.append((candidate.content, existing))
        content = self.rewrite.get(candidate.content, candidate.content)
        return ProfileDecision(action="create", content=content)


def _ctx(tmp_path: Path, encoder: CountingEncoder, scripted: bool = True) -> MemoryContext:
    return make_ctx(tmp_path, encoder, scripted=scripted)


def _draft(
    rec: SessionRecord, enc: CountingEncoder, text: str, person: str, i: int, profile: bool = False
) -> DraftFact:
    """A draft whose vector is what the encoder gives its text, as extraction would."""
    return draft(rec, text, enc.single(text), [text.split()[1].lower()], [person], i, None, profile)


def _assert_vectors_are_single_encodes(ctx: MemoryContext, enc: CountingEncoder) -> None:
    index = ctx.index("t", "s")
    for f in index.facts.items():
        assert np.allclose(index.facts.vector(f.id), enc.single(f.text))
    for e in index.events.items():
        assert np.allclose(index.events.vector(e.id), enc.single(e.summary))
    for p in index.profiles.items():
        assert np.allclose(index.profiles.vector(p.id), enc.single(p.content))


def _two_events(ctx: MemoryContext, enc: CountingEncoder) -> CommitStats:
    links = ctx.backend.links  # type: ignore[attr-defined]
    links["Ann bought paint brushes."] = ["Ann paints landscapes."]
    links["Ann framed a painting."] = ["Ann bought paint brushes."]
    links["Bob bakes sourdough."] = ["Bob grinds flour."]
    rec = session_record("s0", 0, WHEN, ["Ann", "Bob"])
    texts = [
        ("Ann paints landscapes.", "Ann"),
        ("Bob grinds flour.", "Bob"),
        ("Ann bought paint brushes.", "Ann"),
        ("Bob bakes sourdough.", "Bob"),
        ("Ann framed a painting.", "Ann"),
    ]
    drafts = [_draft(rec, enc, t, p, i) for i, (t, p) in enumerate(texts)]
    return commit_facts(ctx, rec, drafts)


def test_a_stage_embeds_the_summaries_of_all_its_events_in_one_call(tmp_path: Path) -> None:
    enc = CountingEncoder(dict(FACTS))
    ctx = _ctx(tmp_path, enc)
    stats = _two_events(ctx, enc)
    events = ctx.index("t", "s").events.items()
    assert stats.events_created == 2 and len(events) == 2
    assert len(enc.batches) == 1  # the drafts bring their own vectors
    assert sorted(enc.batches[0]) == sorted(e.summary for e in events)
    _assert_vectors_are_single_encodes(ctx, enc)


def test_refreshing_an_event_whose_summary_did_not_change_embeds_nothing(
    tmp_path: Path,
) -> None:
    enc = CountingEncoder(dict(FACTS))
    ctx = _ctx(tmp_path, enc)
    _two_events(ctx, enc)
    index = ctx.index("t", "s")
    before = {e.id: index.events.vector(e.id).copy() for e in index.events.items()}
    calls = enc.calls
    changes = Changes()
    refresh_events(ctx, index, list(before), changes, CommitStats())
    assert enc.calls == calls
    for eid, vector in before.items():
        assert (index.events.vector(eid) == vector).all()
        assert (changes.vectors[(Kind.EVENTS, eid)] == vector).all()
    _assert_vectors_are_single_encodes(ctx, enc)


def test_verification_embeds_its_updates_and_residual_in_one_call(tmp_path: Path) -> None:
    enc = CountingEncoder(dict(FACTS))
    ctx = _ctx(tmp_path, enc)
    ctx.settings.llm.skip_rules = False  # show the verifier every candidate
    ctx.settings.memory.conflict_top_k = 5
    rec0 = session_record("s0", 0, WHEN, ["Ann"])
    seeded = [
        _draft(rec0, enc, "Ann lives in Boston.", "Ann", 0),
        _draft(rec0, enc, "Ann owns a cat.", "Ann", 1),
        _draft(rec0, enc, "Ann drives a van.", "Ann", 2),
    ]
    commit_facts(ctx, rec0, seeded)
    ids = {d.text: d.id for d in seeded}
    new = "Ann moved to Denver with her new dog."
    ctx.backend.verdicts[new] = VerifyDecision(  # type: ignore[attr-defined]
        residual="Ann has a dog.",
        updates=[
            FactUpdate(fact_id=ids["Ann lives in Boston."], text="Ann lives in Denver."),
            FactUpdate(fact_id=ids["Ann owns a cat."], text="Ann owns a cat."),  # unchanged
            FactUpdate(fact_id=ids["Ann drives a van."], text=new),  # the new fact's own text
        ],
    )
    calls = enc.calls
    rec1 = session_record("s1", 1, WHEN, ["Ann"])
    stats = commit_facts(ctx, rec1, [_draft(rec1, enc, new, "Ann", 0)])
    assert stats.updates == 3 and stats.facts_stored == 1
    assert enc.batches[calls:] == [["Ann lives in Denver.", "Ann has a dog."]]
    texts = {f.text for f in ctx.index("t", "s").facts.items()}
    assert texts == {"Ann lives in Denver.", "Ann owns a cat.", new, "Ann has a dog."}
    _assert_vectors_are_single_encodes(ctx, enc)


def _pending_profiles(
    tmp_path: Path, enc: CountingEncoder, people: list[str]
) -> tuple[MemoryContext, SessionRecord, ProfileWriter]:
    ctx = _ctx(tmp_path, enc, scripted=False)
    writer = ProfileWriter(ctx.settings)
    ctx.backend = writer
    rec = session_record("s0", 0, WHEN, sorted(set(people)))
    hobbies = ["sails boats.", "plays chess.", "grows tomatoes.", "collects stamps."]
    drafts = [
        _draft(rec, enc, f"{p} {hobbies[i]}", p, i, profile=True) for i, p in enumerate(people)
    ]
    commit_facts(ctx, rec, drafts)
    ctx.settings.llm.skip_rules = False  # every candidate goes to the writer
    return ctx, rec, writer


def test_a_profile_batch_embeds_all_its_candidates_in_one_call(tmp_path: Path) -> None:
    enc = CountingEncoder(dict(FACTS))
    ctx, rec, _ = _pending_profiles(tmp_path, enc, ["Ann", "Bob", "Cid"])
    calls = enc.calls
    stats = profile_batch(ctx, rec)
    assert stats.profile_changes == 3
    assert enc.batches[calls:] == [
        ["Ann: Ann sails boats.", "Bob: Bob plays chess.", "Cid: Cid grows tomatoes."]
    ]
    _assert_vectors_are_single_encodes(ctx, enc)


def test_reworded_profiles_of_different_people_are_embedded_together(tmp_path: Path) -> None:
    enc = CountingEncoder(dict(FACTS))
    ctx, rec, writer = _pending_profiles(tmp_path, enc, ["Ann", "Bob", "Cid"])
    writer.rewrite = {
        "Ann: Ann sails boats.": "Ann sails.",
        "Bob: Bob plays chess.": "Bob plays chess.",
        "Cid: Cid grows tomatoes.": "Cid gardens.",
    }
    calls = enc.calls
    profile_batch(ctx, rec)
    # the candidates, then every reworded text at once (Bob's is his fact's own text)
    assert enc.batches[calls:] == [
        ["Ann: Ann sails boats.", "Bob: Bob plays chess.", "Cid: Cid grows tomatoes."],
        ["Ann sails.", "Cid gardens."],
    ]
    assert sorted(p.content for p in ctx.index("t", "s").profiles.items()) == [
        "Ann sails.",
        "Bob plays chess.",
        "Cid gardens.",
    ]
    _assert_vectors_are_single_encodes(ctx, enc)


def test_a_reworded_profile_is_embedded_before_the_same_person_is_ranked(
    tmp_path: Path,
) -> None:
    enc = CountingEncoder(dict(FACTS))
    ctx, rec, writer = _pending_profiles(tmp_path, enc, ["Ann", "Ann"])
    # pairwise keyword overlap: a score recomputed afterwards, when the second profile has
    # joined the space (and moved BM25's IDF), is still the one the writer was shown
    ctx.settings.similarity.lexical = "jaccard"
    writer.rewrite = {"Ann: Ann sails boats.": "Ann sails."}
    calls = enc.calls
    profile_batch(ctx, rec)
    assert enc.batches[calls:] == [
        ["Ann: Ann sails boats.", "Ann: Ann plays chess."],
        ["Ann sails."],  # the second candidate is ranked against it
    ]
    (_, first), (second_text, shown) = writer.seen
    assert first == [] and len(shown) == 1
    index = ctx.index("t", "s")
    keywords = index.facts.items()[1].keywords  # the second candidate's, from its fact
    expected = index.profiles.hybrid(
        enc.single(second_text),
        TextQuery.of(second_text, keywords),
        ctx.settings.similarity,
        index.profiles.mask(["Ann"]),
    )
    score = {s.id: s.score for s in expected}[shown[0].id]
    assert shown[0].score == pytest.approx(score)
    _assert_vectors_are_single_encodes(ctx, enc)


def test_a_candidate_worded_as_its_fact_reuses_the_fact_vector(tmp_path: Path) -> None:
    enc = CountingEncoder(dict(FACTS))
    ctx = _ctx(tmp_path, enc, scripted=False)  # the rules backend: candidate = fact text
    rec = session_record("s0", 0, WHEN, ["Ann", "Bob"])
    drafts = [
        _draft(rec, enc, "Ann lives in Boston.", "Ann", 0, profile=True),
        _draft(rec, enc, "Bob works as a nurse.", "Bob", 1, profile=True),
    ]
    commit_facts(ctx, rec, drafts)
    calls = enc.calls
    stats = profile_batch(ctx, rec)
    assert stats.profile_changes == 2
    assert enc.calls == calls
    _assert_vectors_are_single_encodes(ctx, enc)
