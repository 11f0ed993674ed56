"""Keyword normalisation and extraction: lower-cased, punctuation stripped, names kept out."""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from importlib import resources

import snowballstemmer

_TOKEN = re.compile(r"[A-Za-z][A-Za-z'\-]*[A-Za-z]|[A-Za-z]")
_EDGE_PUNCT = re.compile(r"^[^a-z0-9]+|[^a-z0-9]+$")

STOPWORDS = frozenset(
    line.strip()
    for line in resources.files("common.text")
    .joinpath("stopwords.txt")
    .read_text("utf-8")
    .splitlines()
    if line.strip() and not line.startswith("#")
)

_MONTHS = frozenset(
    [
        "january",
        "february",
        "march",
        "april",
        "may",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
    ]
)
_WEEKDAYS = frozenset(
    ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
)


def normalize_keyword(word: str) -> str | None:
    """One keyword in canonical form, or None when it carries no topic."""
    word = word.lower().replace("\u2019", "'")
    if word.endswith("'s"):
        word = word[:-2]
    word = _EDGE_PUNCT.sub("", word).replace("'", "")
    if len(word) < 3 or word in STOPWORDS or word in _MONTHS or word in _WEEKDAYS:
        return None
    if word.isdigit():
        return None
    if len(word) > 4 and word.endswith(("ches", "shes", "sses", "xes")):
        word = word[:-2]
    elif len(word) > 4 and word.endswith("ies"):
        word = word[:-3] + "y"
    elif len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    return word


_STEMMER = snowballstemmer.stemmer("english")


@lru_cache(maxsize=65536)
def match_key(keyword: str) -> str:
    """What keywords are compared by: the Snowball (Porter 2) stem of the canonical form, so
    "playing", "plays" and "play" match. Stored keywords stay readable; only the indexes
    that compare them (postings, Jaccard, graph edges) use this key."""
    return str(_STEMMER.stemWord(keyword))


def match_keys(keywords: Iterable[str]) -> frozenset[str]:
    return frozenset(match_key(k) for k in keywords)


def name_tokens(names: Iterable[str]) -> set[str]:
    """Lower-cased tokens of person names, so names never become keywords."""
    tokens: set[str] = set()
    for name in names:
        for token in _TOKEN.findall(name):
            tokens.add(token.lower())
    return tokens


def normalize_keywords(words: Iterable[str], names: Iterable[str] = ()) -> list[str]:
    """Canonical, de-duplicated keywords in first-seen order, names removed."""
    banned = name_tokens(names)
    out: list[str] = []
    for raw in words:
        for token in _TOKEN.findall(raw):
            bare = token.lower().replace("\u2019", "'").removesuffix("'s")
            if bare in banned:
                continue
            norm = normalize_keyword(token)
            if norm and norm not in out:
                out.append(norm)
    return out


def extract_keywords(text: str, names: Iterable[str] = (), limit: int = 5) -> list[str]:
    """Topical keywords of a text: content words, longest first among the earliest ones."""
    candidates = normalize_keywords([text], names)
    if len(candidates) <= limit:
        return candidates
    ranked = sorted(range(len(candidates)), key=lambda i: (-len(candidates[i]), i))[:limit]
    return [candidates[i] for i in sorted(ranked)]
