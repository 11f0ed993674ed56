"""The conversations tests feed in: the bundled sample (its file, and its sessions as API bodies),
a one-turn session body to vary, a two-session LoCoMo conversation with three questions and
its facts in the authors' pre-extracted format, where the shared LoCoMo data lies, and a
small file in LongMemEval's schema."""

from __future__ import annotations

import json
from typing import Any

from workers.launch import ROOT

SAMPLE = ROOT / "cli" / "samples" / "sample_conversation.json"
LOCOMO = ROOT.parent / "shared" / "data" / "locomo"
# Six LongMemEval questions in the official files' schema, one of each kind the scorer treats
# apart: evidence in one session or two, sessions listed out of time order, the answer said
# by the assistant, an abstention (`_abs`).
TINY_LONGMEMEVAL = ROOT / "tests" / "helpers" / "longmemeval_tiny.json"


def sample_sessions() -> list[dict[str, Any]]:
    """The sample's four sessions, each a body for `POST /v1/spaces/{space}/sessions`."""
    sample = json.loads(SAMPLE.read_text())
    return [{**s, "participants": sample["participants"]} for s in sample["sessions"]]


def session(
    session_id: str, text: str = "Tom adopted a beagle named Biscuit.", **over: Any
) -> dict[str, Any]:
    """A one-turn session body by Tom, with `over` in place of its fields."""
    return {
        "session_id": session_id,
        "started_at": "2024-03-04T19:10:00Z",
        "participants": ["Tom", "Priya"],
        "turns": [{"speaker": "Tom", "text": text}],
        **over,
    }


TINY_LOCOMO = {
    "sample_id": "tiny",
    "conversation": {
        "speaker_a": "Ana",
        "speaker_b": "Ben",
        "session_1_date_time": "1:00 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ana", "dia_id": "D1:1", "text": "I adopted a grey cat named Miso."},
            {"speaker": "Ben", "dia_id": "D1:2", "text": "I am training for the Boston marathon."},
        ],
        "session_2_date_time": "2:00 pm on 20 May, 2023",
        "session_2": [
            {"speaker": "Ana", "dia_id": "D2:1", "text": "Miso knocked my vase off the shelf."},
            {"speaker": "Ben", "dia_id": "D2:2", "text": "I ran twenty miles on Sunday morning."},
        ],
    },
    "qa": [
        {"question": "What is the name of Ana's cat?", "answer": "Miso", "evidence": ["D1:1"],
         "category": 4},
        {"question": "What did Ana's cat break?", "answer": "a vase", "evidence": ["D1:1", "D2:1"],
         "category": 1},
        {"question": "What is Ben training for?", "answer": "marathon", "evidence": ["D1:2"],
         "category": 3},
    ],
}  # fmt: skip


# The authors' pre-extracted facts format for TINY_LOCOMO: one entry per turn that yielded facts.
TINY_LOCOMO_FACTS = {
    "metadata": {"source_file": "tiny.json", "total_sessions": 2},
    "results": [
        {"session": "session_1", "session_number": 1, "session_time": "1:00 pm on 8 May, 2023",
         "dia_id": "D1:1", "speaker": "Ana", "text": "I adopted a grey cat named Miso.",
         "facts": ["Ana adopted a grey cat named Miso."]},
        {"session": "session_1", "session_number": 1, "session_time": "1:00 pm on 8 May, 2023",
         "dia_id": "D1:2", "speaker": "Ben", "text": "I am training for the Boston marathon.",
         "facts": ["Ben is training for the Boston marathon.", "Ben likes running."]},
        {"session": "session_2", "session_number": 2, "session_time": "2:00 pm on 20 May, 2023",
         "dia_id": "D2:1", "speaker": "Ana", "text": "Miso knocked my vase off the shelf.",
         "facts": ["Ana's cat Miso knocked her vase off the shelf."]},
    ],
}  # fmt: skip
