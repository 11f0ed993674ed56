"""A comparable dump of what a store holds for a space."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from common.models.memory import Event, Fact, Profile
from common.settings import StoreSettings
from common.store.backends import open_store
from common.store.base import Kind


def dump(path: Path, tenant: str, spaces: list[str]) -> dict[str, Any]:
    store = open_store(StoreSettings(qdrant_path=path), 384)
    try:
        out: dict[str, Any] = {}
        for space in spaces:
            facts = [
                Fact.model_validate(p.payload) for p in store.scroll(Kind.FACTS, tenant, space)
            ]
            events = [
                Event.model_validate(p.payload) for p in store.scroll(Kind.EVENTS, tenant, space)
            ]
            profiles = [
                Profile.model_validate(p.payload)
                for p in store.scroll(Kind.PROFILES, tenant, space)
            ]
            out[space] = {
                "facts": sorted(
                    (
                        f.id,
                        f.text,
                        tuple(sorted(f.event_ids)),
                        tuple(f.all_turn_ids()),
                        tuple(h.text for h in f.history),
                        f.profile_pending,
                    )
                    for f in facts
                ),
                "events": sorted(
                    (e.id, e.summary, tuple(sorted(e.fact_ids)), tuple(e.keywords)) for e in events
                ),
                "profiles": sorted(
                    (
                        p.id,
                        p.person,
                        p.content,
                        str(p.t_from),
                        tuple((v.content, str(v.t_from), str(v.t_to)) for v in p.history),
                    )
                    for p in profiles
                ),
            }
        return out
    finally:
        store.close()


def differences(got: dict[str, Any], want: dict[str, Any], most: int = 6) -> str:
    """What differs between two dumps, per space and kind: the entries only one side holds
    (at most `most` of each), so a failing comparison says what to look at."""
    lines = []
    for space in sorted(set(got) | set(want)):
        for kind in ("facts", "events", "profiles"):
            mine = set(got.get(space, {}).get(kind, []))
            theirs = set(want.get(space, {}).get(kind, []))
            if mine == theirs:
                continue
            lines.append(f"{space} {kind}: {len(mine)} got, {len(theirs)} wanted")
            lines += [f"  only got:    {e}" for e in sorted(mine - theirs)[:most]]
            lines += [f"  only wanted: {e}" for e in sorted(theirs - mine)[:most]]
    return "\n".join(lines)
