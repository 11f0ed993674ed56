"""Prompts for every LLM stage, one module each, beside the pydantic model of its answer.

Each module has a `VERSION` (bump it when the wording or the response model changes; it
is recorded with the calls), a `Response` model, and a `request(...)` that renders the
stage's inputs into a `ChatRequest`. Candidates are shown numbered from 1 and answers
refer to those numbers, which small models get right far more often than long ids.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, StringConstraints

from common.llm.transport import ChatRequest

# Every string a model writes is bounded, so a looping small model hits the schema's limit
# (enforced by grammar-constrained servers) instead of running into max_tokens.
Name = Annotated[str, StringConstraints(max_length=60)]
Keyword = Annotated[str, StringConstraints(max_length=32)]


def json_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON schema with every `$ref` inlined (some servers' grammars need it) and
    every property required (defaults stay in the model, for validation)."""
    raw = model.model_json_schema()
    defs = raw.pop("$defs", {})

    def inline(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                return inline(defs[node["$ref"].rsplit("/", 1)[-1]])
            out = {k: inline(v) for k, v in node.items() if k != "title"}
            if "properties" in out:  # every key present: steadier output from small models
                out["required"] = list(out["properties"])
                out["additionalProperties"] = False
            return out
        if isinstance(node, list):
            return [inline(v) for v in node]
        return node

    schema: dict[str, Any] = inline(raw)
    return schema


def max_chars(schema: dict[str, Any]) -> int:
    """The longest JSON text `schema` allows (strings without a bound count 200 chars)."""
    kind = schema.get("type")
    if "enum" in schema:
        return max(len(str(v)) for v in schema["enum"]) + 2
    if kind == "string":
        return int(schema.get("maxLength", 200)) + 2
    if kind == "array":
        return int(schema.get("maxItems", 20)) * (max_chars(schema.get("items", {})) + 2) + 2
    if kind == "object":
        props = schema.get("properties", {})
        return sum(len(k) + 4 + max_chars(v) for k, v in props.items()) + 2
    return 12  # numbers, booleans, null


def chat(
    stage: str,
    version: str,
    system: str,
    user: str,
    model: type[BaseModel],
    max_tokens: int,
    schema: dict[str, Any] | None = None,
) -> ChatRequest:
    """A system + user request that asks for JSON matching `model` (or `schema`). The token
    budget covers the longest answer the schema allows (at 2 characters a token), so a
    model that fills every field to its bound is not cut off."""
    schema = schema or json_schema(model)
    return ChatRequest(
        stage=stage,
        messages=[
            {"role": "system", "content": system.strip() + "\nReply with one JSON object only."},
            {"role": "user", "content": user.strip()},
        ],
        schema=schema,
        schema_name=f"{stage}_v{version}",
        max_tokens=max(max_tokens, max_chars(schema) // 2 + 32),
    )


def numbered(lines: list[str]) -> str:
    return "\n".join(f"{i}. {line}" for i, line in enumerate(lines, start=1)) or "(none)"
