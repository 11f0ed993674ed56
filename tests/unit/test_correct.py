"""Correcting a fact on hand-built spaces (table vectors, real store): the text, its vector
and keywords change, the old text stays in the history marked as a correction, provenance
stays, events and profiles are rebuilt; repeats are refused; reruns write nothing twice."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from common.context import MemoryContext
from common.errors import Conflict, NotFound
from common.llm.contracts import FactUpdate, VerifyDecision
from common.memory.admin import administer
from common.memory.commit import commit_facts, profile_batch
from common.memory.correct import correct_fact
from common.memory.erase import erase_facts, erase_session
from common.models.api import FactCorrection
from common.models.jobs import AdminPayload
from common.models.memory import Fact
from common.models.responses import CorrectionReceipt, Erased
from common.models.session import SessionRecord
from common.store import records
from common.store.base import Kind
from common.store.coordination.roles import Coordination
from tests.helpers.contexts import make_ctx
from tests.helpers.doubles import ScriptedBackend, TableEncoder, unit
from tests.helpers.records import draft, session_record

WHEN = datetime(2024, 3, 1, 12, 0)
AT = datetime(2024, 7, 1, 9, 30)
BOSTON = "Ann lives in Boston."
BOULDER = "Ann lives in Boulder."
BRUSHES = "Ann bought paint brushes."
VECTORS = {
    BOSTON: unit(1, 0, 0, 0),
    BOULDER: unit(0.6, 0.8, 0, 0),
    BRUSHES: unit(0.7, 0, 0.7, 0),
}


def _space(tmp_path: Path) -> MemoryContext:
    """s0 says Ann lives in Boston (a profile cites it) and bought paint brushes; the two
    facts share an event."""
    ctx = make_ctx(tmp_path, TableEncoder(dict(VECTORS)))
    assert isinstance(ctx.backend, ScriptedBackend)
    ctx.backend.links[BRUSHES] = [BOSTON]
    rec = session_record("s0", 0, WHEN, ["Ann"])
    _commit(ctx, rec, [BOSTON, BRUSHES])
    return ctx


def _commit(ctx: MemoryContext, rec: SessionRecord, texts: list[str]) -> None:
    """Commit profile-worthy facts (vectors from the encoder's table), then the session's
    profile batch."""
    records.put_session(ctx.store, rec)
    table = ctx.embedder.table  # type: ignore[attr-defined]
    drafts = [
        draft(rec, t, table[t], [t.split()[1].lower()], ["Ann"], index=i, profile=True)
        for i, t in enumerate(texts)
    ]
    commit_facts(ctx, rec, drafts)
    profile_batch(ctx, rec)


def _fact(ctx: MemoryContext, text: str) -> Fact:
    return next(f for f in ctx.index("t", "s").facts.items() if f.text == text)


def _correct(ctx: MemoryContext, fact_id: str, text: str, reason: str | None = None) -> Any:
    correction = FactCorrection(text=text, reason=reason)
    return correct_fact(ctx, "t", "s", fact_id, correction, AT)


def _script(
    ctx: MemoryContext, text: str, vector: np.ndarray, verdict: VerifyDecision | None = None
) -> None:
    """The encoder's vector for `text` and, when given, the verifier's verdict on it."""
    assert isinstance(ctx.embedder, TableEncoder) and isinstance(ctx.backend, ScriptedBackend)
    ctx.embedder.table[text] = vector
    if verdict is not None:
        ctx.backend.verdicts[text] = verdict


def _stored(ctx: MemoryContext, kind: Kind) -> str:
    return json.dumps([p.payload for p in ctx.store.scroll(kind, "t", "s")])


def test_a_correction_rewrites_the_fact_and_keeps_its_history_and_provenance(
    tmp_path: Path,
) -> None:
    ctx = _space(tmp_path)
    home = _fact(ctx, BOSTON)
    receipt = _correct(ctx, home.id, f"  {BOULDER} ", reason="misheard the city")
    assert isinstance(receipt, CorrectionReceipt) and receipt.changed
    ctx.indexes.drop("t", "s")  # read back from the store
    index = ctx.index("t", "s")
    fact = index.facts.get(home.id)
    assert fact.text == BOULDER and receipt.fact.text == BOULDER
    assert "boulder" in fact.keywords and "boston" not in fact.keywords
    assert np.allclose(index.facts.vector(home.id), VECTORS[BOULDER])
    assert fact.source == home.source and fact.also_from == home.also_from
    assert fact.event_ids == home.event_ids and fact.time.session == home.time.session
    (revision,) = fact.history
    assert revision.text == BOSTON and revision.keywords == home.keywords
    assert revision.replaced_by_session is None and revision.replaced_with_fact == home.id
    assert revision.correction is not None
    assert revision.correction.reason == "misheard the city" and revision.correction.at == AT


def test_the_events_and_profiles_built_on_the_fact_read_the_new_text(tmp_path: Path) -> None:
    ctx = _space(tmp_path)
    index = ctx.index("t", "s")
    (event,) = index.events.items()
    (profile,) = [p for p in index.profiles.items() if "Boston" in p.content]
    receipt = _correct(ctx, _fact(ctx, BOSTON).id, BOULDER)
    assert receipt.events_rewritten == [event.id]
    assert profile.id in receipt.profiles_rewritten + receipt.profiles_deleted
    after = ctx.index("t", "s")
    assert "Boulder" in after.events.get(event.id).summary
    assert any("Boulder" in p.content for p in after.profiles.items())
    # Boston lives on only in the fact's history
    assert "Boston" not in _stored(ctx, Kind.EVENTS) + _stored(ctx, Kind.PROFILES)
    assert _stored(ctx, Kind.FACTS).count("Boston") == 1


def test_the_same_correction_again_writes_nothing(tmp_path: Path) -> None:
    ctx = _space(tmp_path)
    home = _fact(ctx, BOSTON)
    _correct(ctx, home.id, BOULDER, reason="misheard")
    again = _correct(ctx, home.id, BOULDER, reason="misheard")
    assert not again.changed and again.events_rewritten == [] and again.profiles_rewritten == []
    assert len(ctx.index("t", "s").facts.get(home.id).history) == 1


def test_an_unknown_or_erased_fact_is_not_found(tmp_path: Path) -> None:
    ctx = _space(tmp_path)
    with pytest.raises(NotFound, match="no fact 'nope'"):
        _correct(ctx, "nope", BOULDER)
    brushes = _fact(ctx, BRUSHES)
    erase_facts(ctx, "t", "s", {brushes.id}, Erased())
    with pytest.raises(NotFound):
        _correct(ctx, brushes.id, "Ann bought oil paints.")


def test_a_correction_that_repeats_another_fact_is_refused(tmp_path: Path) -> None:
    ctx = _space(tmp_path)
    home = _fact(ctx, BOSTON)
    _script(ctx, "Ann bought some paint brushes.", VECTORS[BRUSHES])
    with pytest.raises(Conflict, match="already holds") as refused:
        _correct(ctx, home.id, "Ann bought some paint brushes.")
    assert _fact(ctx, BRUSHES).id in str(refused.value)
    assert ctx.index("t", "s").facts.get(home.id).text == BOSTON
    # the verifier finding it said already is a refusal too
    _script(
        ctx, "Ann has brushes for painting.", unit(0.5, 0, 0.8, 0.3), VerifyDecision(store=False)
    )
    with pytest.raises(Conflict):
        _correct(ctx, home.id, "Ann has brushes for painting.")
    assert ctx.index("t", "s").facts.get(home.id).history == []


def test_facts_the_verifier_finds_superseded_are_named_and_left_alone(tmp_path: Path) -> None:
    ctx = _space(tmp_path)
    brushes = _fact(ctx, BRUSHES)
    text = "Ann bought new paint brushes and sold the old ones."
    verdict = VerifyDecision(store=False, updates=[FactUpdate(fact_id=brushes.id, text=text)])
    _script(ctx, text, unit(0.6, 0, 0.75, 0.3), verdict)
    receipt = _correct(ctx, _fact(ctx, BOSTON).id, text)
    assert receipt.changed and receipt.superseded == [brushes.id]
    assert ctx.index("t", "s").facts.get(brushes.id).text == BRUSHES


def test_a_correction_interrupted_before_the_fact_is_written_finishes_when_run_again(
    tmp_path: Path,
) -> None:
    ctx = _space(tmp_path)
    home = _fact(ctx, BOSTON)
    real = ctx.store.upsert
    armed = [True]

    def upsert(kind: Kind, points: Any) -> None:
        if kind == Kind.FACTS and armed[0]:
            armed[0] = False
            raise ConnectionError("the store went away")
        real(kind, points)

    ctx.store.upsert = upsert  # type: ignore[method-assign]
    with pytest.raises(ConnectionError):
        _correct(ctx, home.id, BOULDER)
    assert ctx.index("t", "s").facts.get(home.id).text == BOSTON  # reloaded as stored
    assert _correct(ctx, home.id, BOULDER).changed
    fact = ctx.index("t", "s").facts.get(home.id)
    assert fact.text == BOULDER and [r.text for r in fact.history] == [BOSTON]


def test_erasing_a_session_keeps_a_correction_made_after_it(tmp_path: Path) -> None:
    """s0 says Boston, s1 updates it to Denver, a correction makes it Boulder: erasing s1
    leaves Boston replaced by the correction; erasing s0, the fact's source, erases it."""
    ctx = _space(tmp_path)
    home = _fact(ctx, BOSTON)
    denver = "Ann lives in Denver."
    verdict = VerifyDecision(store=False, updates=[FactUpdate(fact_id=home.id, text=denver)])
    _script(ctx, denver, unit(0.8, 0.6, 0, 0), verdict)
    _commit(ctx, session_record("s1", 1, datetime(2024, 6, 1), ["Ann"]), [denver])
    _correct(ctx, home.id, BOULDER, reason="typo")
    assert [r.replaced_by_session for r in ctx.index("t", "s").facts.get(home.id).history] == [
        "s1",
        None,
    ]
    erase_session(ctx, "t", "s", "s1", Erased())
    fact = ctx.index("t", "s").facts.get(home.id)
    assert fact.text == BOULDER and [r.text for r in fact.history] == [BOSTON]
    (revision,) = fact.history
    assert revision.correction is not None and revision.correction.reason == "typo"
    assert "Denver" not in _stored(ctx, Kind.FACTS)
    erase_session(ctx, "t", "s", "s0", Erased())
    assert home.id not in ctx.index("t", "s").facts


def test_the_admin_task_corrects_at_the_time_it_was_sent(tmp_path: Path) -> None:
    ctx = _space(tmp_path)
    home = _fact(ctx, BOSTON)
    coord = Coordination.sqlite(tmp_path / "coordination.sqlite")
    payload = AdminPayload(
        enqueued_at=1719826200.0,
        tenant="t",
        space="s",
        op="correct_fact",
        item_id=home.id,
        correction=FactCorrection(text=BOULDER),
    )
    done = administer(ctx, coord, payload)
    coord.close()
    assert isinstance(done, CorrectionReceipt)
    (revision,) = done.fact.history
    assert revision.correction is not None
    assert revision.correction.at == datetime(2024, 7, 1, 9, 30)  # 1719826200 in UTC


def test_a_correction_body_names_every_error_at_once() -> None:
    with pytest.raises(ValidationError) as refused:
        FactCorrection.model_validate({"text": "   ", "reason": "", "by": "me"})
    where = {tuple(e["loc"]) for e in refused.value.errors()}
    assert where == {("text",), ("reason",), ("by",)}
    with pytest.raises(ValidationError):
        FactCorrection(text="x" * 2001)
    assert FactCorrection(text="Ann lives in Boulder.").reason is None
