"""The one identity rule for people's names, applied wherever a name comes in.

A name is the same person when it reads the same once it is in Unicode NFC (so "José"
typed with a combining accent is the José written with "é") and its blanks are collapsed
(runs of blanks become one space; none lead or trail). Case counts: "Ann" and "ann" are two
people, as the filters, the graph and the stored profiles have always told them apart.
"""

from __future__ import annotations

import re
import unicodedata

# Blank means only these (Python's `str.isspace` and the byte order mark), written so that
# Python, ECMA-262 (the OpenAPI schema) and Rust regexes read them alike.
SPACE = (
    r"\u0009-\u000d\u001c-\u0020\u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f"
    r"\u3000\ufeff"
)
_BLANKS = re.compile(f"[{SPACE}]+")


def person_name(value: str) -> str:
    """`value` as the name it identifies: NFC, blanks collapsed to one space, trimmed."""
    return _BLANKS.sub(" ", unicodedata.normalize("NFC", value)).strip(" ")


def same_person(a: str, b: str) -> bool:
    return person_name(a) == person_name(b)


def nfc(text: str) -> str:
    """Free text (a question) in the form names are kept in, so a name in it matches."""
    return unicodedata.normalize("NFC", text)
