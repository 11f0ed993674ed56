"""The end-of-session profile batch (§3.3): temporal profiles with validity intervals."""

from __future__ import annotations

from datetime import date, datetime

import numpy as np

from common.context import MemoryContext
from common.llm import usage
from common.llm.contracts import ProfileCandidate, ProfileDecision, ProfileView
from common.memory.changes import Changes, CommitStats
from common.memory.verify import view
from common.models import ids
from common.models.memory import Fact, Profile, ProfileVersion
from common.similarity import TextQuery
from common.store.space_index import SpaceIndex


def _add_evidence(profile: Profile, fact_id: str) -> Profile:
    if fact_id in profile.evidence_fact_ids:
        return profile
    return profile.model_copy(update={"evidence_fact_ids": [*profile.evidence_fact_ids, fact_id]})


def update_current(profile: Profile, cand: ProfileCandidate, content: str) -> Profile:
    """The trait changed from `cand.valid_from` on: the current state moves into history."""
    day = max(cand.valid_from.date(), profile.t_from)
    old = ProfileVersion(
        content=profile.content,
        keywords=profile.keywords,
        evidence_fact_ids=profile.evidence_fact_ids,
        t_from=profile.t_from,
        t_to=day,
    )
    return profile.model_copy(
        update={
            "content": content,
            "keywords": cand.keywords,
            "evidence_fact_ids": [cand.fact_id],
            "t_from": day,
            "history": [*profile.history, old],
        }
    )


def modify_history(profile: Profile, cand: ProfileCandidate, content: str) -> Profile:
    """A state that held before the current one: split or prepend a historical version."""
    day = cand.valid_from.date()
    new = ProfileVersion(
        content=content,
        keywords=cand.keywords,
        evidence_fact_ids=[cand.fact_id],
        t_from=day,
        t_to=profile.t_from,
    )
    history: list[ProfileVersion] = []
    placed = False
    for version in profile.history:
        if not placed and version.t_from <= day < version.t_to:
            if version.t_from < day:
                history.append(version.model_copy(update={"t_to": day}))
            history.append(new.model_copy(update={"t_to": version.t_to}))
            placed = True
        else:
            history.append(version)
    if not placed:
        earliest = min([v.t_from for v in profile.history] + [profile.t_from])
        history.append(new.model_copy(update={"t_to": earliest}))
    history.sort(key=lambda v: (v.t_from, v.t_to))
    return profile.model_copy(update={"history": history})


def _create(index: SpaceIndex, cand: ProfileCandidate, content: str) -> Profile:
    return Profile(
        id=ids.profile_id(index.tenant, index.space, cand.person, cand.fact_id),
        tenant=index.tenant,
        space=index.space,
        person=cand.person,
        content=content,
        keywords=cand.keywords,
        evidence_fact_ids=[cand.fact_id],
        t_from=cand.valid_from.date(),
        slot=cand.slot,
    )


class _ProfileVectors:
    """The vectors of one batch's profile texts. A text the space already holds (a pending
    fact's, a profile's) keeps its vector; new texts are embedded together: the candidates in
    one call, the reworded profiles when a ranking reads them or when the batch ends."""

    def __init__(
        self, ctx: MemoryContext, index: SpaceIndex, changes: Changes, facts: list[Fact]
    ) -> None:
        self._ctx, self._index, self._changes = ctx, index, changes
        self._known = {f.text: index.facts.vector(f.id).copy() for f in facts}
        self._profiles_read = False  # the profiles' texts joined `_known` (read when needed)
        self._waiting: dict[str, str] = {}  # profile id -> its text, not yet embedded
        self._blank = np.zeros(index.profiles.matrix.shape[1], dtype=np.float32)

    def of(self, texts: list[str]) -> list[np.ndarray]:
        """The vectors of `texts`, embedding the new ones in one call."""
        fresh = list(dict.fromkeys(t for t in texts if t not in self._known))
        if fresh and not self._profiles_read:
            # a text no pending fact has (a model's rewording) may be a profile's already;
            # read once per batch, and only then: a space holds thousands of profiles
            self._profiles_read = True
            rows = self._index.profiles
            for profile in rows.items():
                if profile.id not in self._waiting:  # a blank row holds no vector yet
                    self._known.setdefault(profile.content, rows.vector(profile.id).copy())
            fresh = [t for t in fresh if t not in self._known]
        if fresh:
            self._known.update(zip(fresh, self._ctx.embedder.encode(fresh), strict=True))
        return [self._known[t] for t in texts]

    def put(self, profile: Profile) -> None:
        """Store `profile`; a new text leaves a blank row that `settle` fills before use."""
        text, rows = profile.content, self._index.profiles
        if self._waiting.get(profile.id, text) != text:
            del self._waiting[profile.id]  # reworded before it was embedded
        if profile.id in self._waiting:
            vector = self._blank
        elif profile.id in rows and rows.get(profile.id).content == text:
            vector = rows.vector(profile.id).copy()  # unchanged text: its own vector
        elif text in self._known:
            vector = self._known[text]
        else:
            self._waiting[profile.id] = text
            vector = self._blank
        self._index.put_profile(profile, vector)
        self._changes.profile(profile, vector)

    def settle(self, mask: np.ndarray | None = None) -> None:
        """Embed the waiting texts of the rows in `mask` (all when None), in one call."""
        rows = self._index.profiles.rows
        due = [p for p in self._waiting if mask is None or mask[rows[p]]]
        for pid, vector in zip(due, self.of([self._waiting[p] for p in due]), strict=True):
            del self._waiting[pid]
            profile = self._index.profiles.get(pid)
            self._index.put_profile(profile, vector)
            self._changes.profile(profile, vector)


def run_profile_batch(
    ctx: MemoryContext, index: SpaceIndex, changes: Changes, stats: CommitStats
) -> None:
    """Turn every pending profile candidate of the space into profile changes."""
    cfg = ctx.settings.memory
    pending = index.profile_pending()
    skip = ctx.settings.llm.skip_rules
    if not pending and skip:
        usage.skipped("profile_extract")
        return
    candidates = ctx.backend.profile_candidates([view(f) for f in pending])
    vectors = _ProfileVectors(ctx, index, changes, pending)
    for cand, vector in zip(candidates, vectors.of([c.content for c in candidates]), strict=True):
        mask = index.profiles.mask([cand.person])
        vectors.settle(mask)  # the ranking reads these rows
        ranked = index.profiles.hybrid(
            vector,
            TextQuery.of(cand.content, cand.keywords),
            ctx.settings.similarity,
            mask,
            k=cfg.profile_top_k,
        )
        decision: ProfileDecision
        if skip and ranked and ranked[0].cosine > cfg.profile_duplicate_threshold:
            usage.skipped("profile_update")
            decision = ProfileDecision(action="redundant", profile_id=ranked[0].id)
        elif skip and (not ranked or ranked[0].score < cfg.profile_min_score):
            usage.skipped("profile_update")
            decision = ProfileDecision(action="create", content=cand.content)
        else:
            views = []
            for r in ranked:
                known = index.profiles.get(r.id)
                views.append(
                    ProfileView(
                        id=r.id,
                        person=known.person,
                        content=known.content,
                        keywords=known.keywords,
                        t_from=_midnight(known.t_from),
                        score=r.score,
                    )
                )
            decision = ctx.backend.update_profile(cand, views)
        if decision.action == "create":
            decision = _into_slot(index, cand, mask) or decision
        _apply(index, cand, decision, vectors, stats)
    vectors.settle()
    for fact in pending:
        cleared = fact.model_copy(update={"profile_pending": False})
        vec = index.facts.vector(fact.id).copy()
        index.put_fact(cleared, vec)
        changes.fact(cleared, vec)


def _into_slot(
    index: SpaceIndex, cand: ProfileCandidate, mask: np.ndarray
) -> ProfileDecision | None:
    """A candidate of a slot the person's profiles already hold (where they live) never makes
    a second profile of it, however little the two texts share: it is that profile's next
    version, or an earlier one when it was said of an earlier time."""
    if cand.slot is None:
        return None
    for row in np.flatnonzero(mask):
        held = index.profiles.records[int(row)]
        if held.slot == cand.slot and held.person == cand.person:
            later = cand.valid_from.date() >= held.t_from
            return ProfileDecision(
                action="update_current" if later else "modify_history",
                profile_id=held.id,
                content=cand.content,
            )
    return None


def _midnight(day: date) -> datetime:
    return datetime.combine(day, datetime.min.time())


def _apply(
    index: SpaceIndex,
    cand: ProfileCandidate,
    decision: ProfileDecision,
    vectors: _ProfileVectors,
    stats: CommitStats,
) -> None:
    content = (decision.content or cand.content).strip() or cand.content
    target = (
        index.profiles.get(decision.profile_id)
        if decision.profile_id and decision.profile_id in index.profiles
        else None
    )
    if decision.action != "create" and target is None:
        decision = ProfileDecision(action="create", content=content)
    if decision.action == "redundant":
        assert target is not None
        profile = _add_evidence(target, cand.fact_id)
        if profile is target:
            return
    elif decision.action == "update_current":
        assert target is not None
        profile = update_current(target, cand, content)
        stats.profile_changes += 1
    elif decision.action == "modify_history":
        assert target is not None
        profile = modify_history(target, cand, content)
        stats.profile_changes += 1
    else:
        profile = _create(index, cand, content)
        stats.profile_changes += 1
    vectors.put(profile)


def cited_facts(profile: Profile) -> set[str]:
    """Every fact any version of the profile cites as evidence."""
    cited = set(profile.evidence_fact_ids)
    for version in profile.history:
        cited |= set(version.evidence_fact_ids)
    return cited


def profile_without(
    profile: Profile, tainted: set[str], candidates: list[ProfileCandidate]
) -> Profile | None:
    """The profile with each version that cites a `tainted` fact rebuilt from its other
    evidence: its content is what the first remaining fact states about the person (its
    entry in `candidates`), and a version none of whose remaining facts states anything
    about the person is dropped. A dropped current version gives way to the latest one
    left; None when no version is left."""
    stated: dict[str, ProfileCandidate] = {}
    for cand in candidates:
        if cand.person == profile.person:
            stated.setdefault(cand.fact_id, cand)

    def rebuilt(version: ProfileVersion) -> ProfileVersion | None:
        if not set(version.evidence_fact_ids) & tainted:
            return version
        kept = [e for e in version.evidence_fact_ids if e not in tainted]
        source = next((stated[e] for e in kept if e in stated), None)
        if source is None:
            return None
        return version.model_copy(
            update={
                "content": source.content,
                "keywords": source.keywords,
                "evidence_fact_ids": kept,
            }
        )

    history = [v for v in map(rebuilt, profile.history) if v is not None]
    current = rebuilt(
        ProfileVersion(
            content=profile.content,
            keywords=profile.keywords,
            evidence_fact_ids=profile.evidence_fact_ids,
            t_from=profile.t_from,
            t_to=date.max,
        )
    )
    if current is None:
        if not history:
            return None
        current = max(history, key=lambda v: v.t_from)
        history.remove(current)
    return profile.standing(current, history)
