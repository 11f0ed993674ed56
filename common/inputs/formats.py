"""Turn a file into validated sessions, or fail with an error naming the problem.

Formats (detected from the JSON's shape unless given):
- `session`: AtomMem's own format, one session or `{"space", "participants", "sessions": [...]}`
- `locomo`: a LoCoMo conversation (`conversation` with `speaker_a`, `session_<k>` ...)
- `locomo-facts`: the AtomMem authors' pre-extracted facts (`results[]` with `facts`)
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from common.errors import InvalidInput
from common.models.api import check_session_id, check_time
from common.models.session import SessionInput, Turn
from common.text.timeanchor import TimeParseError, parse_session_time

Format = Literal["auto", "session", "locomo", "locomo-facts"]


@dataclass
class SpaceInput:
    """Sessions read from one source, in session order, and the space they name (if any)."""

    space: str | None
    sessions: list[SessionInput]


class SessionFile(BaseModel):
    """AtomMem's multi-session file; sessions inherit `participants` when they omit them."""

    space: str | None = None
    participants: list[str] | None = None
    sessions: list[dict[str, Any]]


def explain(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:5]:
        where = ".".join(str(p) for p in err["loc"]) or "(top level)"
        parts.append(f"{where}: {err['msg']}")
    more = len(exc.errors()) - 5
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")


def checked_session(data: dict[str, Any], where: str) -> SessionInput:
    """A session, held to the API's rules for its id and time as well, so a space built from
    files serves every session through the API alike."""
    try:
        session = SessionInput.model_validate(data)
    except ValidationError as exc:
        raise InvalidInput(f"{where}: {explain(exc)}") from None
    try:
        check_session_id(session.session_id)
    except ValueError as exc:
        raise InvalidInput(f"{where}: session_id: {exc}") from None
    try:
        check_time(session.started_at)
    except ValueError as exc:
        raise InvalidInput(f"{where}: started_at: {exc}") from None
    return session


def parse_session_document(doc: Any, where: str) -> SpaceInput:
    if not isinstance(doc, dict):
        raise InvalidInput(f"{where}: expected a JSON object, got {type(doc).__name__}")
    if "sessions" not in doc:
        return SpaceInput(space=doc.get("space"), sessions=[checked_session(doc, where)])
    try:
        wrapper = SessionFile.model_validate(doc)
    except ValidationError as exc:
        raise InvalidInput(f"{where}: {explain(exc)}") from None
    if not wrapper.sessions:
        raise InvalidInput(f"{where}: 'sessions' is empty")
    sessions = []
    for i, raw in enumerate(wrapper.sessions):
        if not isinstance(raw, dict):
            raise InvalidInput(f"{where}: sessions.{i} is not an object")
        data = dict(raw)
        if "participants" not in data and wrapper.participants is not None:
            data["participants"] = wrapper.participants
        data.setdefault("seq", i)
        sessions.append(checked_session(data, f"{where}: sessions.{i}"))
    return SpaceInput(space=wrapper.space, sessions=sessions)


_DIA = re.compile(r"^D(\d+):(\d+)$")


def _position(dia_id: str, fallback: int) -> int:
    m = _DIA.match(dia_id)
    return int(m.group(2)) if m else fallback


def _time(value: Any, where: str) -> Any:
    if not isinstance(value, str):
        raise InvalidInput(f"{where}: session time missing or not a string")
    try:
        return parse_session_time(value)
    except TimeParseError as exc:
        raise InvalidInput(f"{where}: {exc}") from None


def parse_locomo(doc: Any, where: str) -> SpaceInput:
    """A LoCoMo conversation: raw turns that go through the configured extractor."""
    conv = doc.get("conversation") if isinstance(doc, dict) else None
    if not isinstance(conv, dict):
        raise InvalidInput(f"{where}: no 'conversation' object (is this a LoCoMo file?)")
    speakers = [conv.get("speaker_a"), conv.get("speaker_b")]
    if not all(isinstance(s, str) and s.strip() for s in speakers):
        raise InvalidInput(f"{where}: conversation lacks speaker_a/speaker_b")
    numbers = sorted(int(m.group(1)) for k in conv if (m := re.fullmatch(r"session_(\d+)", k)))
    if not numbers:
        raise InvalidInput(f"{where}: conversation has no session_<k> entries")
    sessions = []
    for n in numbers:
        raw_turns = conv[f"session_{n}"]
        if not isinstance(raw_turns, list) or not raw_turns:
            continue
        turns = []
        for i, t in enumerate(raw_turns):
            if not isinstance(t, dict) or "speaker" not in t or "text" not in t:
                raise InvalidInput(f"{where}: session_{n}[{i}] lacks speaker or text")
            dia = str(t.get("dia_id") or f"D{n}:{i + 1}")
            turns.append(
                Turn(
                    id=dia,
                    speaker=t["speaker"],
                    text=t["text"],
                    position=_position(dia, i + 1),
                    image_caption=t.get("blip_caption"),
                )
            )
        data = {
            "session_id": f"session_{n}",
            "started_at": _time(conv.get(f"session_{n}_date_time"), f"{where}: session_{n}"),
            "participants": speakers,
            "turns": turns,
            "seq": n,
        }
        sessions.append(checked_session(data, f"{where}: session_{n}"))
    return SpaceInput(space=_sample_name(doc, where), sessions=sessions)


def parse_locomo_facts(doc: Any, where: str, participants: list[str] | None = None) -> SpaceInput:
    """The reference's pre-extracted facts: one entry per turn with its `facts`."""
    results = doc.get("results") if isinstance(doc, dict) else None
    if not isinstance(results, list):
        raise InvalidInput(f"{where}: no 'results' list (is this a pre-extracted facts file?)")
    grouped: dict[int, dict[str, Any]] = {}
    required = ("session_number", "session_time", "dia_id", "speaker", "text", "facts")
    for i, entry in enumerate(results):
        if not isinstance(entry, dict):
            raise InvalidInput(f"{where}: results[{i}] is not an object")
        missing = [k for k in required if k not in entry]
        if missing:
            raise InvalidInput(f"{where}: results[{i}] lacks {', '.join(missing)}")
        if not isinstance(entry["facts"], list) or not all(
            isinstance(f, str) for f in entry["facts"]
        ):
            raise InvalidInput(f"{where}: results[{i}].facts must be a list of strings")
        n = int(entry["session_number"])
        slot = grouped.setdefault(
            n, {"time": entry["session_time"], "turns": [], "name": entry.get("session")}
        )
        slot["turns"].append(
            Turn(
                id=str(entry["dia_id"]),
                speaker=str(entry["speaker"]),
                text=str(entry["text"]),
                position=_position(str(entry["dia_id"]), len(slot["turns"])),
                facts=list(entry["facts"]),
            )
        )
    if not grouped:
        raise InvalidInput(f"{where}: 'results' is empty")
    speakers: list[str] = list(participants or [])
    for slot in grouped.values():
        for turn in slot["turns"]:
            if not participants and turn.speaker not in speakers:
                speakers.append(turn.speaker)
    sessions = []
    for n in sorted(grouped):
        slot = grouped[n]
        data = {
            "session_id": slot["name"] or f"session_{n}",
            "started_at": _time(slot["time"], f"{where}: session {n}"),
            "participants": speakers,
            "turns": slot["turns"],
            "seq": n,
        }
        sessions.append(checked_session(data, f"{where}: session {n}"))
    return SpaceInput(space=_sample_name(doc, where), sessions=sessions)


def _sample_name(doc: dict[str, Any], where: str) -> str:
    meta = doc.get("metadata") or {}
    source = meta.get("source_file") if isinstance(meta, dict) else None
    name = doc.get("sample_id") or source or Path(where).name
    return str(name).removesuffix(".json")


def detect(doc: Any) -> Format:
    if isinstance(doc, dict):
        if "conversation" in doc:
            return "locomo"
        if "results" in doc:
            return "locomo-facts"
    return "session"


def load_json(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InvalidInput(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"{path}: cannot read: {exc}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInput(
            f"{path}: malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None


def read_sessions(path: Path, fmt: Format = "auto") -> SpaceInput:
    """Every session in `path`, validated in full before anything is stored."""
    doc = load_json(path)
    kind = detect(doc) if fmt == "auto" else fmt
    where = str(path)
    if kind == "locomo":
        return parse_locomo(doc, where)
    if kind == "locomo-facts":
        return parse_locomo_facts(doc, where)
    return parse_session_document(doc, where)
