"""`bench extract`'s parts on hand-made cases: the one-to-one matching and its P/R/F1, the
guideline fault detectors, the labelled pairs and the downstream recall it reads."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bench.extract_quality import downstream, label_agreement, reference_facts, turn_places
from bench.fact_faults import FAULTS, fault_counts, faults_of, rates
from bench.fact_matching import SESSION, PlacedFact, Score, assign, match
from common.inputs.formats import parse_locomo, parse_locomo_facts
from tests.helpers.samples import TINY_LOCOMO, TINY_LOCOMO_FACTS

PEOPLE = ["Caroline", "Melanie"]


def test_assign_finds_the_best_one_to_one_matching_not_the_greedy_one() -> None:
    similarity = np.array([[0.9, 0.8], [0.85, 0.1]])
    allowed = np.ones_like(similarity, dtype=bool)
    # greedy would take (0, 0) at 0.9 and leave row 1 without a partner above 0.5
    pairs = assign(similarity, allowed, 0.5)
    assert [(p.extracted, p.reference) for p in pairs] == [(0, 1), (1, 0)]
    assert [p.similarity for p in pairs] == [0.8, 0.85]


def test_assign_keeps_only_pairs_at_or_above_the_threshold_and_allowed() -> None:
    similarity = np.array([[0.9, 0.8], [0.85, 0.1]])
    allowed = np.ones_like(similarity, dtype=bool)
    # at 0.82 only column 0 is eligible, and it can be taken once
    assert [(p.extracted, p.reference) for p in assign(similarity, allowed, 0.82)] == [(0, 0)]
    assert [(p.extracted, p.reference) for p in assign(similarity, allowed, 0.85)] == [(0, 0)]
    assert assign(similarity, allowed, 0.95) == []
    allowed[0, 0] = False
    assert [(p.extracted, p.reference) for p in assign(similarity, allowed, 0.82)] == [(1, 0)]
    assert assign(np.zeros((0, 3)), np.zeros((0, 3), dtype=bool), 0.5) == []


def _unit(*values: float) -> np.ndarray:
    v = np.array(values, dtype=np.float32)
    return v / np.linalg.norm(v)


def test_match_pairs_within_a_session_and_window_with_known_precision_recall_f1() -> None:
    a, b, c, d = np.eye(4, dtype=np.float32)
    extracted = [
        PlacedFact("e0", "s1", 0, "D1:1"),  # = r0, same turn
        PlacedFact("e1", "s1", 1, "D1:2"),  # = r1, one turn later
        PlacedFact("e2", "s2", 0, "D2:1"),  # = r2, but r2 is in another session
        PlacedFact("e3", "s1", 0, "D1:1"),  # = r0 as well: one partner only
    ]
    reference = [
        PlacedFact("r0", "s1", 0, "D1:1"),
        PlacedFact("r1", "s1", 2, "D1:3"),
        PlacedFact("r2", "s1", 0, "D1:1"),
        PlacedFact("r3", "s2", 5, "D2:6"),
    ]
    ev = np.stack([a, b, c, _unit(1, 0, 0, 0.2)])
    rv = np.stack([a, b, c, d])
    same_turn = match(extracted, reference, ev, rv, 0.7, 0)
    assert [(p.extracted, p.reference) for p in same_turn] == [(0, 0)]
    s = Score(len(same_turn), len(extracted), len(reference))
    assert (s.precision, s.recall) == (0.25, 0.25)
    assert s.f1 == pytest.approx(0.25)
    near = match(extracted, reference, ev, rv, 0.7, 1)
    assert [(p.extracted, p.reference) for p in near] == [(0, 0), (1, 1)]
    # e2 never meets r2 (sessions differ); e3 would, but r0 is taken by the closer e0
    wide = match(extracted, reference, ev, rv, 0.7, SESSION)
    assert [(p.extracted, p.reference) for p in wide] == [(0, 0), (1, 1)]
    assert all(p.similarity >= 0.7 for p in wide)
    # below the cosine of e3 and r0 (0.98) but not of e0 and r0 (1.0): e3 is never kept
    assert [(p.extracted, p.reference) for p in match(extracted, reference, ev, rv, 0.99, 0)] == [
        (0, 0)
    ]


def test_score_adds_and_reports_percent() -> None:
    total = Score(2, 4, 5) + Score(1, 2, 5)
    assert (total.matched, total.extracted, total.reference) == (3, 6, 10)
    out = total.as_dict()
    assert out["precision"] == 50.0 and out["recall"] == 30.0 and out["f1"] == 37.5
    assert Score(0, 0, 0).as_dict()["f1"] == 0.0


# (fault, fact, whether the detector finds it), each detector with positive and negative cases
FAULT_CASES = [
    ("first_or_second_person", "I went to a support group.", True),
    ("first_or_second_person", "Caroline loves my painting.", True),
    ("first_or_second_person", "Taking care of ourselves is vital.", True),
    ("first_or_second_person", "Caroline thinks you're brave.", True),
    ("first_or_second_person", "Melanie is swamped with her kids and work.", False),
    ("first_or_second_person", "Caroline moved to the US from Sweden.", False),
    ("first_or_second_person", "Caroline believes that one should be kind.", False),
    ("first_or_second_person", "Melanie is carving out some me-time each day.", False),
    ("opening_pronoun", "It's a great way to relax after a long day.", True),
    ("opening_pronoun", "She felt happy and thankful.", True),
    ("opening_pronoun", "Their inclusivity really spoke to Caroline.", True),
    ("opening_pronoun", "Caroline said she felt happy.", False),
    ("opening_pronoun", "Italy is where Melanie went.", False),
    ("unanchored_time", "Melanie is going camping next month.", True),
    ("unanchored_time", "Caroline went to a support group yesterday.", True),
    ("unanchored_time", "Caroline started transitioning three years ago.", True),
    ("unanchored_time", "Melanie recently ran a charity race.", True),
    ("unanchored_time", "Melanie went camping last Friday.", True),
    ("unanchored_time", "Caroline went to a support group on 7 May 2023.", False),
    ("unanchored_time", "Caroline went to a support group yesterday, May 7, 2023.", False),
    ("unanchored_time", "Melanie ran a race last Saturday, 20 May.", False),
    ("unanchored_time", "Melanie has been painting for two years.", False),
    ("unanchored_time", "Caroline loves hiking.", False),
    ("no_named_participant", "Caroline loves hiking.", False),
    ("no_named_participant", "That charity race sounds great, Mel!", False),
    ("no_named_participant", "Melanie's kids are excited.", False),
    ("no_named_participant", "The transgender stories were so inspiring!", True),
    ("no_named_participant", "The colors really blend nicely.", True),
    ("no_named_participant", "The new car broke down.", True),
    ("chit_chat", "Thanks, Mel!", True),
    ("chit_chat", "Hey Caroline, good to see you!", True),
    ("chit_chat", "Caroline thanked Melanie for the compliment.", True),
    ("chit_chat", "Melanie congratulates Caroline.", True),
    ("chit_chat", "Caroline says goodbye.", True),
    ("chit_chat", "Wow, so cool, Caroline!", True),
    ("chit_chat", "Caroline is transgender.", False),
    ("chit_chat", "Melanie ran a charity race for mental health.", False),
    ("chit_chat", "Caroline agrees that self-care is important.", False),
    ("chit_chat", "Take care, Mel!", True),
    ("chit_chat", "Yep, staying focused is key for any entrepreneur.", False),
    ("chit_chat", "And thanks for asking, Melanie got another cat named Bailey.", False),
    ("several_sentences", "Caroline found the stories inspiring. She felt happy.", True),
    ("several_sentences", "Melanie ran a race! It was rewarding.", True),
    ("several_sentences", "Caroline met Dr. Smith at the clinic.", False),
    ("several_sentences", "Melanie ran a race on 20 May 2023.", False),
]


@pytest.mark.parametrize(("fault", "text", "expected"), FAULT_CASES)
def test_fault_detectors(fault: str, text: str, expected: bool) -> None:
    assert FAULTS[fault](text, PEOPLE) is expected
    assert (fault in faults_of(text, PEOPLE)) is expected


def test_fault_counts_and_rates() -> None:
    facts = [
        ("Thanks, Mel!", PEOPLE),
        ("It was great.", PEOPLE),
        ("Caroline loves hiking.", PEOPLE),
        ("Melanie is going camping next month.", PEOPLE),
    ]
    counts = fault_counts(facts)
    assert counts["chit_chat"] == 2  # "It was great." has no content word
    assert counts["unanchored_time"] == 1
    assert counts["no_named_participant"] == 1  # "Mel" names Melanie
    assert counts["opening_pronoun"] == 1
    assert counts["first_or_second_person"] == 0
    assert rates(counts, 4)["unanchored_time"] == 25.0
    assert rates(counts, 0)["chit_chat"] is None


def test_reference_facts_sit_at_their_dialogue_turn() -> None:
    dialogue = parse_locomo(TINY_LOCOMO, "tiny.json")
    places = turn_places(dialogue)
    assert places["D1:2"] == ("session_1", 1) and places["D2:1"] == ("session_2", 0)
    facts = reference_facts(parse_locomo_facts(TINY_LOCOMO_FACTS, "tiny.json"), places)
    assert [(f.session, f.turn, f.dia_id) for f in facts] == [
        ("session_1", 0, "D1:1"),
        ("session_1", 1, "D1:2"),
        ("session_1", 1, "D1:2"),
        ("session_2", 0, "D2:1"),
    ]


def test_label_agreement_by_band_and_turns_apart(tmp_path: Path) -> None:
    pairs = [
        {"similarity": 0.52, "turns_apart": 0, "same": False},
        {"similarity": 0.58, "turns_apart": 0, "same": True},
        {"similarity": 0.63, "turns_apart": 0, "same": True},
        {"similarity": 0.64, "turns_apart": 0, "same": False},
        {"similarity": 0.70, "turns_apart": 1, "same": False},
    ]
    labels = tmp_path / "labels.json"
    labels.write_text(json.dumps({"pairs": pairs}), encoding="utf-8")
    out = label_agreement(labels, 0.6, 0)
    assert out is not None
    assert out["same_by_band"]["0.60-0.65"] == {"pairs": 2, "same": 1, "share_same": 50.0}
    assert set(out["same_by_band"]) == {"0.50-0.55", "0.55-0.60", "0.60-0.65"}
    assert (out["kept_not_same"], out["dropped_same"]) == (1, 1)
    assert out["same_by_turns_apart"]["1"]["same"] == 0
    assert label_agreement(tmp_path / "none.json", 0.6, 0) is None


def test_downstream_reads_the_same_conversations_recall(tmp_path: Path) -> None:
    questions = [
        {"conversation": "a", "category": 4, "recall": 1.0},
        {"conversation": "a", "category": 1, "recall": 0.5},
        {"conversation": "b", "category": 4, "recall": 0.0},
    ]
    path = tmp_path / "locomo_full.json"
    doc = {"variant": "full", "k": 10, "settings": {"llm_backend": "rules"}, "questions": questions}
    path.write_text(json.dumps(doc), encoding="utf-8")
    out = downstream(path, ["a"], "rules")
    assert out["overall"]["recall"] == 75.0 and out["overall"]["questions"] == 2
    assert out["per_conversation"] == {"a": 75.0} and "note" not in out
    assert "not this run's 'openai'" in downstream(path, ["a", "b"], "openai")["note"]
    assert "note" not in downstream(path, ["a"], None)  # the authors' facts: no extractor
    assert downstream(tmp_path / "none.json", ["a"], "rules")["missing"] is True
