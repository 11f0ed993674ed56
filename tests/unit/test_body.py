"""The body gate's verdicts: JSON text in UTF-8 passes, anything else is named."""

from __future__ import annotations

import json

import pytest

from api.body import MAX_DEPTH, problem


@pytest.mark.parametrize(
    "body",
    [b"{}", b'{"question": "caf\xc3\xa9 \\ud83d\\ude00"}', b"[" * MAX_DEPTH + b"]" * MAX_DEPTH],
)
def test_json_text_in_utf8_passes(body: bytes) -> None:
    assert problem(body) is None


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b'{"q": "\xff"}', "byte 7 is not UTF-8"),
        (json.dumps({"q": "a"}).encode("utf-16"), "byte 0 is not UTF-8"),
        (json.dumps({"q": "a"}).encode("utf-16-le"), "NUL bytes"),
        (b'{"q": 1,\n "k": }', "Expecting value at line 2 column 7"),
        (b"\xef\xbb\xbf{}", "BOM"),
        (b"[" * (MAX_DEPTH + 2) + b"]" * (MAX_DEPTH + 2), f"deeper than {MAX_DEPTH}"),
        (b"[" * 100_000 + b"]" * 100_000, f"deeper than {MAX_DEPTH}"),
        (b'{"turns": [{"text": "a\\udc00"}]}', "body.turns.0.text holds a lone surrogate"),
        (b'{"a\\ud800": 1}', "a key in body holds a lone surrogate"),
    ],
)
def test_anything_else_is_named(body: bytes, words: str) -> None:
    assert words in (problem(body) or "")
