"""Correcting a fact through `atommem serve`, driven by the SDK as a user would: search finds
the new text and not the old, the history keeps the old one as a correction, and the event
and profile built on the fact read the new text."""

from __future__ import annotations

from pathlib import Path

import pytest

from api.client import AtomMem, ConflictError, InvalidError, NotFoundError
from tests.helpers.serve import serving

pytestmark = pytest.mark.integration

CHAT = [
    {"role": "user", "content": "I moved to Denver last month.", "created_at": "2024-06-02T10:00"},
    {"role": "assistant", "content": "How did the move go?"},
    {"role": "user", "content": "I drove the moving truck to Denver last month with my brother."},
    {"role": "user", "content": "I also adopted a grey cat named Mochi."},
]  # fmt: skip
WRONG, RIGHT = "Denver", "Boulder"


def test_a_corrected_fact_is_found_by_its_new_text_and_remembers_the_old(tmp_path: Path) -> None:
    with serving(tmp_path / "data") as served, AtomMem(served.url, served.key()) as mem:
        mem.create_space("priya")
        jobs = mem.add_messages("priya", CHAT, conversation_id="chat-1", user="Priya")
        assert [j.state for j in mem.wait([j.job_id for j in jobs], timeout=300)] == ["done"]
        (home,) = [f for f in mem.get_all("priya") if f"moved to {WRONG}" in f.text]
        built_on = [p for p in mem.get_all("priya", "profiles") if home.id in p.evidence_fact_ids]
        assert built_on and home.event_ids  # a profile and an event were built on it
        text = home.text.replace(WRONG, RIGHT)

        receipt = mem.correct_fact("priya", home.id, text, reason="misheard the city")
        assert receipt.changed and receipt.fact.text == text
        assert receipt.events_rewritten == home.event_ids

        hits = mem.search("priya", f"Did Priya move to {RIGHT}?").hits
        assert hits and hits[0].fact_id == home.id and hits[0].text == text
        hits = mem.search("priya", "Where did Priya move to?").hits
        assert home.id in [h.fact_id for h in hits]
        assert all(h.text != home.text for h in hits)
        history = mem.history("priya", home.id)
        assert history.current == text and [r.text for r in history.history] == [home.text]
        (revision,) = history.history
        assert revision.replaced_by_session is None and revision.correction is not None
        assert revision.correction.reason == "misheard the city"
        assert history.provenance == [home.source, *home.also_from]
        (event,) = [mem.get("priya", e, "events") for e in home.event_ids]
        assert text in event.summary and home.text not in event.summary
        profiles = mem.get_all("priya", "profiles")
        assert any(p.content == text and home.id in p.evidence_fact_ids for p in profiles)
        assert all(home.text not in p.content for p in profiles)

        again = mem.correct_fact("priya", home.id, text, reason="misheard the city")
        assert not again.changed and len(again.fact.history) == 1
        (cat,) = [f for f in mem.get_all("priya") if "Mochi" in f.text]
        with pytest.raises(ConflictError, match=cat.id):
            mem.correct_fact("priya", home.id, cat.text)
        with pytest.raises(InvalidError) as refused:
            mem.correct_fact("priya", home.id, "  ", reason="")
        assert "body.text" in refused.value.detail and "body.reason" in refused.value.detail
        with pytest.raises(NotFoundError):
            mem.correct_fact("priya", "no-such-fact", text)
        mem.delete("priya", fact_id=home.id)
        with pytest.raises(NotFoundError):
            mem.correct_fact("priya", home.id, text)
