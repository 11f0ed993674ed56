"""Deterministic ids: the same input always names the same point, so retries rewrite."""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any

NAMESPACE = uuid.UUID("5b0e4a2c-6a51-4f0e-9d1c-a70c0ffee001")


def stable_id(*parts: str | int) -> str:
    """uuid5 of the parts joined with '/'."""
    return str(uuid.uuid5(NAMESPACE, "/".join(str(p) for p in parts)))


def space_id(tenant: str, space: str) -> str:
    return stable_id(tenant, space)


def session_point_id(tenant: str, space: str, session_id: str) -> str:
    return stable_id(tenant, space, "session", session_id)


def fact_id(tenant: str, space: str, session_id: str, turn_key: str, index: int) -> str:
    return stable_id(tenant, space, "fact", session_id, turn_key, index)


def event_id(tenant: str, space: str, seed_fact_id: str) -> str:
    return stable_id(tenant, space, "event", seed_fact_id)


def profile_id(tenant: str, space: str, person: str, seed_fact_id: str) -> str:
    return stable_id(tenant, space, "profile", person, seed_fact_id)


def content_hash(payload: Any) -> str:
    """sha256 of a JSON-serialisable value with sorted keys."""
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def job_id(tenant: str, space: str, session_id: str) -> str:
    """Jobs are named by their session, so a resubmission is the same job."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"atommem/{tenant}/{space}/{session_id}"))
