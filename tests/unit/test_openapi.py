"""The served OpenAPI spec types every reply, and the wire models carry what the workers send."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

import pytest

import api.main
from common.memory.erase import ErasureReport
from common.models.responses import Erased, ErasureReceipt, Space
from common.settings import Settings

SPEC = api.main.create_app(Settings(broker={"url": "redis://127.0.0.1:6379/0"})).openapi()
OPERATIONS = [
    (method.upper(), path, operation)
    for path, methods in SPEC["paths"].items()
    for method, operation in methods.items()
]


def _typed(schema: dict[str, Any]) -> bool:
    """A named model, or an inline schema that says what it holds (not `{}`)."""
    if "$ref" in schema:
        return True
    if schema.get("type") == "object":  # `dict[str, Any]` is an object of anything
        values = schema.get("additionalProperties")
        return bool(schema.get("properties")) or isinstance(values, dict) and _typed(values)
    if schema.get("type") == "array":
        return _typed(schema.get("items", {}))
    if "type" in schema:
        return True
    members = [m for k in ("anyOf", "oneOf", "allOf") for m in schema.get(k, [])]
    return bool(members) and all(_typed(m) for m in members)


def test_the_spec_lists_every_route() -> None:
    assert len(OPERATIONS) >= 20


@pytest.mark.parametrize(
    ("method", "path", "operation"), OPERATIONS, ids=[f"{m} {p}" for m, p, _ in OPERATIONS]
)
def test_every_success_reply_has_a_typed_schema(
    method: str, path: str, operation: dict[str, Any]
) -> None:
    replies = {code: r for code, r in operation["responses"].items() if code.startswith("2")}
    assert replies, (method, path)
    for code, reply in replies.items():
        if code == "204":
            continue
        schema = reply.get("content", {}).get("application/json", {}).get("schema", {})
        assert _typed(schema), (method, path, code, schema)


def test_not_ready_is_documented_with_the_same_body() -> None:
    replies = SPEC["paths"]["/readyz"]["get"]["responses"]
    assert replies["503"]["content"] == replies["200"]["content"]


def test_the_erasure_receipt_has_every_field_of_the_report() -> None:
    report = ErasureReport(facts_deleted=["f2", "f1"], sessions_deleted=["s1"])
    assert set(Erased.model_fields) == {f.name for f in dataclasses.fields(ErasureReport)}
    wire = {"erased": report.as_dict()}
    assert ErasureReceipt.model_validate(wire).model_dump(mode="json") == wire


@pytest.mark.parametrize(
    "created", [datetime(2024, 5, 1, 9, 30, tzinfo=UTC), datetime(2024, 5, 1, 9, 30, 0, 12)]
)
def test_a_space_keeps_its_creation_time_as_the_worker_wrote_it(created: datetime) -> None:
    counts = {"sessions": 1, "facts": 2, "events": 0, "profiles": 0}
    wire = {"name": "a", "created_at": created.isoformat(), "participants": [], "counts": counts}
    assert Space.model_validate(wire).model_dump(mode="json") == wire
