"""The served OpenAPI spec types every reply, and the wire models carry what the workers send."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

import api.main
from common.models.responses import Erased, ErasureReceipt, Space
from common.settings import BrokerSettings, Settings
from tests.helpers.redis import unreachable_url

SPEC = api.main.create_app(Settings(broker=BrokerSettings(url=unreachable_url()))).openapi()
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


def test_the_erasure_receipt_lists_each_id_once_in_order() -> None:
    report = Erased(facts_deleted=["f2", "f1"], sessions_deleted=["s1"])
    report.facts_deleted.append("f1")  # erasure steps append; two may name the same id
    wire = ErasureReceipt(erased=report).model_dump(mode="json")
    assert wire["erased"]["facts_deleted"] == ["f1", "f2"]
    assert wire["erased"]["events_deleted"] == []
    assert ErasureReceipt.model_validate(wire).model_dump(mode="json") == wire


def test_the_served_receipt_requires_every_list() -> None:
    erased = SPEC["components"]["schemas"]["Erased"]
    assert set(erased["required"]) == set(Erased.model_fields)


@pytest.mark.parametrize(
    "created", [datetime(2024, 5, 1, 9, 30, tzinfo=UTC), datetime(2024, 5, 1, 9, 30, 0, 12)]
)
def test_a_space_keeps_its_creation_time_as_the_worker_wrote_it(created: datetime) -> None:
    counts = {"sessions": 1, "facts": 2, "events": 0, "profiles": 0}
    wire = {"name": "a", "created_at": created.isoformat(), "participants": [], "counts": counts}
    assert Space.model_validate(wire).model_dump(mode="json") == wire


ERROR_BODY = {"$ref": "#/components/schemas/ErrorBody"}
API_OPERATIONS = [op for op in OPERATIONS if op[1].startswith("/v1/")]


def _expected_errors(method: str, path: str) -> set[str]:
    """What a route can answer besides 2xx: every route reads a body and needs a key and Redis;
    one naming a resource can miss it; creation and erasure can clash; a tenant's writes are
    rate-limited; routes that wait on a worker can time out. The executor's review reads and
    appends local files: it neither clashes, nor counts writes, nor waits on a worker."""
    admin, query = path.startswith("/v1/admin"), path.endswith(("/search", "/ask", "/context"))
    codes = {"400", "401", "403", "413", "503"}
    if "{" in path or method != "GET":
        codes.add("422")
    if "{" in path:
        codes.add("404")
    if path.startswith("/v1/executor"):
        return codes
    if (
        method == "POST"
        and not query
        and not path.endswith("/keys")
        or method == "DELETE"
        and not admin
    ):
        codes.add("409")
    if not admin and method in ("POST", "DELETE") and not query:
        codes.add("429")
    if not admin and not path.startswith(("/v1/jobs", "/v1/metrics")):  # these read Redis only
        codes.add("504")
    return codes


@pytest.mark.parametrize(
    ("method", "path", "operation"), API_OPERATIONS, ids=[f"{m} {p}" for m, p, _ in API_OPERATIONS]
)
def test_every_error_a_route_can_give_is_declared_with_the_one_error_body(
    method: str, path: str, operation: dict[str, Any]
) -> None:
    errors = {code: r for code, r in operation["responses"].items() if code[0] in "45"}
    assert _expected_errors(method, path) <= set(errors), (method, path, sorted(errors))
    for code, reply in errors.items():
        assert reply["content"]["application/json"]["schema"] == ERROR_BODY, (path, code)


def test_there_is_one_error_shape() -> None:
    schemas = SPEC["components"]["schemas"]
    assert "HTTPValidationError" not in schemas and "ValidationError" not in schemas
    assert schemas["ErrorBody"]["required"] == ["detail"]
    assert schemas["ErrorBody"]["properties"]["detail"]["type"] == "string"


def _session(**over: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "session_id": "s1",
        "started_at": "2024-03-04T19:10:00Z",
        "participants": ["Tom"],
        "turns": [{"speaker": "Tom", "text": "Hi"}],
    }
    return {**body, **over}


@pytest.mark.parametrize(
    "body",
    [
        _session(),
        _session(session_id=".."),
        _session(session_id="."),
        _session(session_id="a/b"),
        _session(session_id=" \t"),
        _session(session_id="q#2"),
        _session(session_id="..x"),
        _session(session_id="a\x7fb"),
        _session(session_id="a\nb"),
        _session(turns=[{"speaker": "Tom", "text": "  "}]),
        _session(turns=[{"speaker": "Tom"}]),
        _session(turns=[{"speaker": "Tom", "image_caption": "a dog"}]),
        _session(turns=[{"speaker": "Tom", "image_caption": " "}]),
        _session(turns=[{"speaker": "Tom", "facts": ["Tom has a dog."]}]),
        _session(turns=[{"speaker": "Tom", "facts": []}]),
        _session(turns=[{"speaker": "Tom", "text": " ", "facts": []}]),
        _session(participants=[" "], turns=[{"speaker": " ", "text": "Hi"}]),
        _session(seq=2**53),
        _session(seq=2**53 + 1),
        _session(seq=-1),
    ],
)
def test_the_session_schema_states_the_rules_the_server_checks(body: dict[str, Any]) -> None:
    import jsonschema_rs
    import pydantic

    from common.models.api import SessionBody

    schema = {"$ref": "#/components/schemas/SessionBody", "components": SPEC["components"]}
    by_schema = jsonschema_rs.validator_for(schema).is_valid(body)
    try:
        SessionBody.model_validate(body).to_session()
        by_server = True
    except pydantic.ValidationError:
        by_server = False
    assert by_schema == by_server, body


@pytest.mark.parametrize("question", ["where?", "", " ", "\t\n", " a "])
def test_the_query_schema_states_that_a_question_is_not_blank(question: str) -> None:
    import jsonschema_rs
    import pydantic

    from common.models.api import QueryBody

    schema = {"$ref": "#/components/schemas/QueryBody", "components": SPEC["components"]}
    by_schema = jsonschema_rs.validator_for(schema).is_valid({"question": question})
    try:
        QueryBody.model_validate({"question": question})
        by_server = True
    except pydantic.ValidationError:
        by_server = False
    assert by_schema == by_server, question
