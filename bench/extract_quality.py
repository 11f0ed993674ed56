"""`atommem bench extract`: an extractor's facts against the LoCoMo authors' facts for the
same turns, read directly rather than through recall.

The configured extractor (`rules`, or a model endpoint) runs over each conversation's
dialogue exactly as ingest runs it: the session cut into chunks of
`pipeline.extract_batch_turns` turns with `memory.context_window_k` turns of context, through
`extracted_facts`. Its facts and the authors' (`atommem_facts/`, one list per turn) are
placed by session and turn, embedded with the project's model, and matched one to one
(`bench.fact_matching`): precision, recall and F1 per conversation and overall, with the
guideline faults of both sides (`bench.fact_faults`) and, beside them, the downstream
Recall@10 that committed `bench locomo` runs measured from the dialogue and from the
authors' facts.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bench.fact_faults import fault_counts, faults_of, rates
from bench.fact_matching import SESSION, Pair, PlacedFact, Score, match
from bench.locomo import load_conversations, summarize
from common.context import MemoryContext
from common.errors import InvalidInput
from common.inputs.formats import SpaceInput, load_json
from common.llm import usage
from common.memory.extract import chunks, extracted_facts

RESULTS = Path(__file__).parent / "results"
# The committed `bench locomo` runs (variant `full`) the report reads its downstream
# Recall@10 from: the `rules` extractor over the dialogue, and the authors' facts, both
# measured at 047d8a2 with the same retrieval settings.
DIALOGUE_RECALL = RESULTS / "locomo_dialogue" / "locomo_full.json"
FACTS_RECALL = RESULTS / "locomo" / "locomo_full.json"
# Hand-labelled matched pairs the threshold was chosen from (bench/README.md).
THRESHOLD_LABELS = RESULTS / "extract" / "threshold_labels.json"

# The cosine a matched pair needs, and the turns apart it may be; chosen in bench/README.md.
THRESHOLD = 0.60
WINDOW = 0
SWEEP_THRESHOLDS = tuple(round(0.5 + 0.05 * i, 2) for i in range(9))
SWEEP_WINDOWS = {"same_turn": 0, "turns_1": 1, "turns_2": 2, "session": SESSION}
BOUNDARY_EXAMPLES = 6

Encode = Callable[[list[str]], np.ndarray]


@dataclass
class Compared:
    """One conversation's two sets of facts, placed and embedded."""

    name: str
    participants: list[str]
    extracted: list[PlacedFact]
    reference: list[PlacedFact]
    extracted_vectors: np.ndarray
    reference_vectors: np.ndarray
    seconds: float = 0.0
    spent: usage.Usage = field(default_factory=usage.Usage)

    def pairs(self, threshold: float, window: int) -> list[Pair]:
        return match(
            self.extracted,
            self.reference,
            self.extracted_vectors,
            self.reference_vectors,
            threshold,
            window,
        )

    def score(self, threshold: float, window: int) -> Score:
        return Score(len(self.pairs(threshold, window)), len(self.extracted), len(self.reference))


def turn_places(dialogue: SpaceInput) -> dict[str, tuple[str, int]]:
    """Each turn's id -> (its session, its position among the session's turns)."""
    return {
        str(turn.id): (session.session_id, i)
        for session in dialogue.sessions
        for i, turn in enumerate(session.turns)
    }


def reference_facts(facts: SpaceInput, places: dict[str, tuple[str, int]]) -> list[PlacedFact]:
    """The authors' facts, each at the turn it is listed under (a turn the dialogue lacks
    keeps the session and position the facts file gives it)."""
    out = []
    for session in facts.sessions:
        for turn in session.turns:
            key = str(turn.id)
            where = places.get(key, (session.session_id, turn.position or 0))
            for text in turn.facts or []:
                if text.strip():
                    out.append(PlacedFact(text.strip(), where[0], where[1], key))
    return out


def extract(ctx: MemoryContext, dialogue: SpaceInput) -> tuple[list[PlacedFact], usage.Usage]:
    """The configured extractor over every session, chunked as ingest chunks it; each fact at
    its first source turn, with the model calls and tokens it spent."""
    places = turn_places(dialogue)
    size = ctx.settings.pipeline.extract_batch_turns
    context_k = ctx.settings.memory.context_window_k
    out = []
    with usage.metered() as spent:
        for session in dialogue.sessions:
            for chunk, skip in chunks(session, size, context_k):
                for fact in extracted_facts(ctx, chunk, skip):
                    key = fact.turn_ids[0]
                    where = places[key]
                    out.append(PlacedFact(fact.text, where[0], where[1], key))
    return out, spent


def compare(
    ctx: MemoryContext, conversations: Path, facts: Path, only: Sequence[str] = ()
) -> list[Compared]:
    """Each conversation's extraction beside the authors' facts, embedded."""
    dialogues = load_conversations(conversations, None, only)
    with_facts = {c.name: c for c in load_conversations(conversations, facts, only)}
    out = []
    for conv in dialogues:
        started = time.perf_counter()
        extracted, spent = extract(ctx, conv.sessions)
        seconds = time.perf_counter() - started
        reference = reference_facts(with_facts[conv.name].sessions, turn_places(conv.sessions))
        participants = conv.sessions.sessions[0].participants if conv.sessions.sessions else []
        out.append(
            Compared(
                conv.name,
                list(participants),
                extracted,
                reference,
                _encode(ctx.embedder.encode, extracted),
                _encode(ctx.embedder.encode, reference),
                seconds,
                spent,
            )
        )
    return out


def _encode(encode: Encode, facts: Sequence[PlacedFact]) -> np.ndarray:
    if not facts:
        return np.zeros((0, 1), dtype=np.float32)
    return np.asarray(encode([f.text for f in facts]), dtype=np.float32)


def _faults(facts: Sequence[tuple[PlacedFact, list[str]]]) -> dict[str, Any]:
    """Each fault's count and rate over facts (each with its conversation's participants)."""
    counts = fault_counts([(f.text, p) for f, p in facts])
    return {"counts": counts, "rates": rates(counts, len(facts))}


def _fault_examples(
    compared: Sequence[Compared], side: str, per_fault: int
) -> dict[str, list[str]]:
    """The first few facts with each fault, so a reader can check the detectors."""
    out: dict[str, list[str]] = {}
    for conv in compared:
        facts = conv.extracted if side == "extracted" else conv.reference
        for fact in facts:
            for name in faults_of(fact.text, conv.participants):
                found = out.setdefault(name, [])
                if len(found) < per_fault:
                    found.append(fact.text)
    return out


def boundary(
    compared: Sequence[Compared], threshold: float, window: int, n: int
) -> dict[str, list[dict[str, Any]]]:
    """The matched pairs closest to the threshold on each side, from the matching with no
    threshold: what a pair just kept and a pair just dropped look like."""
    found: list[dict[str, Any]] = []
    for conv in compared:
        for pair in conv.pairs(0.0, window):
            e, r = conv.extracted[pair.extracted], conv.reference[pair.reference]
            found.append(
                {
                    "conversation": conv.name,
                    "similarity": round(pair.similarity, 3),
                    "extracted": e.text,
                    "extracted_turn": e.dia_id,
                    "reference": r.text,
                    "reference_turn": r.dia_id,
                }
            )
    found.sort(key=lambda p: (abs(p["similarity"] - threshold), p["conversation"]))
    above = [p for p in found if p["similarity"] >= threshold][:n]
    below = [p for p in found if p["similarity"] < threshold][:n]
    return {
        "kept": sorted(above, key=lambda p: p["similarity"]),
        "dropped": sorted(below, key=lambda p: -p["similarity"]),
    }


def sweep(compared: Sequence[Compared]) -> dict[str, dict[str, dict[str, float | int]]]:
    """Overall P/R/F1 at every candidate threshold for every window rule."""
    out: dict[str, dict[str, dict[str, float | int]]] = {}
    for label, window in SWEEP_WINDOWS.items():
        row = {}
        for threshold in SWEEP_THRESHOLDS:
            total = Score(0, 0, 0)
            for conv in compared:
                total = total + conv.score(threshold, window)
            row[f"{threshold:.2f}"] = total.as_dict()
        out[label] = row
    return out


def label_agreement(labels: Path, threshold: float, window: int) -> dict[str, Any] | None:
    """From hand-labelled pairs (`similarity`, `turns_apart`, `same`: whether the two state
    one fact): among pairs within `window` turns, the share labelled the same fact per band
    of 0.05 and how many the threshold keeps that are not the same or drops that are; and
    the share the same by turns apart."""
    if not labels.exists():
        return None
    doc = load_json(labels)
    pairs = doc.get("pairs") if isinstance(doc, dict) else None
    if not isinstance(pairs, list) or not pairs:
        raise InvalidInput(f"{labels}: no 'pairs' list")
    bands: dict[str, list[bool]] = {}
    apart: dict[str, list[bool]] = {}
    kept_not_same = dropped_same = 0
    for pair in pairs:
        sim, same, turns = float(pair["similarity"]), bool(pair["same"]), int(pair["turns_apart"])
        apart.setdefault(str(turns) if turns <= 2 else ">2", []).append(same)
        if turns > window:
            continue
        low = int(sim / 0.05 + 1e-9) * 0.05
        bands.setdefault(f"{low:.2f}-{low + 0.05:.2f}", []).append(same)
        kept_not_same += int(sim >= threshold and not same)
        dropped_same += int(sim < threshold and same)
    return {
        "file": _shown(labels),
        "pairs": len(pairs),
        "same_by_band": {band: _share(v) for band, v in sorted(bands.items())},
        "kept_not_same": kept_not_same,
        "dropped_same": dropped_same,
        "same_by_turns_apart": {k: _share(v) for k, v in sorted(apart.items())},
    }


def _share(labels: list[bool]) -> dict[str, float | int]:
    return {
        "pairs": len(labels),
        "same": sum(labels),
        "share_same": round(100 * sum(labels) / len(labels), 1),
    }


def downstream(path: Path, names: Sequence[str], backend: str | None) -> dict[str, Any]:
    """Recall@10 of a committed `bench locomo` run over the same conversations, overall and
    per conversation, with the backend and command that measured it; with `backend`, a note
    when the run's was another (its facts then came from another extractor)."""
    shown = _shown(path)
    if not path.exists():
        return {"file": shown, "missing": True}
    doc = load_json(path)
    rows = [q for q in doc.get("questions", []) if q.get("conversation") in set(names)]
    per = {
        name: summarize([q for q in rows if q["conversation"] == name])["overall"]["recall"]
        for name in names
    }
    recorded = doc.get("settings", {}).get("llm_backend")
    out: dict[str, Any] = {
        "file": shown,
        "command": doc.get("command"),
        "variant": doc.get("variant"),
        "k": doc.get("k"),
        "llm_backend": recorded,
        "overall": summarize(rows)["overall"] if rows else None,
        "per_conversation": per,
    }
    if backend is not None and recorded != backend:
        out["note"] = f"measured with the {recorded!r} backend, not this run's {backend!r}"
    return out


def _shown(path: Path) -> str:
    """A path as the results file shows it: relative to the repository where it lies there."""
    try:
        return str(path.resolve().relative_to(RESULTS.parent.parent))
    except ValueError:
        return str(path)


def result_document(
    compared: Sequence[Compared],
    threshold: float,
    window: int,
    command: str,
    settings: dict[str, Any],
    recall_files: tuple[Path, Path],
    labels: Path,
) -> dict[str, Any]:
    """The results file: the figures per conversation and overall, the sweep the threshold
    and window were read from, the pairs at the boundary, and the downstream recall."""
    names = [c.name for c in compared]
    per: dict[str, Any] = {}
    total = Score(0, 0, 0)
    spent = usage.Usage()
    for conv in compared:
        s = conv.score(threshold, window)
        total = total + s
        spent.merge(conv.spent)
        per[conv.name] = {
            **s.as_dict(),
            "extraction_seconds": round(conv.seconds, 2),
            "faults_extracted": _faults([(f, conv.participants) for f in conv.extracted]),
            "faults_reference": _faults([(f, conv.participants) for f in conv.reference]),
        }
    all_extracted = [(f, c.participants) for c in compared for f in c.extracted]
    all_reference = [(f, c.participants) for c in compared for f in c.reference]
    backend = settings["llm_backend"]
    return {
        "benchmark": "extract",
        "command": command,
        "threshold": threshold,
        "window_turns": window,
        "settings": settings,
        "summary": {
            **total.as_dict(),
            "faults_extracted": _faults(all_extracted),
            "faults_reference": _faults(all_reference),
        },
        "per_conversation": per,
        "downstream_recall_at_10": {
            "this_extractor_from_dialogue": downstream(recall_files[0], names, backend),
            "authors_facts": downstream(recall_files[1], names, None),
        },
        "llm": {
            "by_stage": {k: dict(v) for k, v in sorted(spent.stages.items())},
            "calls": spent.total("calls"),
        },
        "sweep": sweep(compared),
        "boundary": boundary(compared, threshold, window, BOUNDARY_EXAMPLES),
        "threshold_labels": label_agreement(labels, threshold, window),
        "fault_examples": {
            "extracted": _fault_examples(compared, "extracted", 3),
            "reference": _fault_examples(compared, "reference", 3),
        },
    }
