"""Keyword normalisation and extraction: lower-cased, punctuation stripped, names kept out."""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

import snowballstemmer

_TOKEN = re.compile(r"[A-Za-z][A-Za-z'\-]*[A-Za-z]|[A-Za-z]")
_EDGE_PUNCT = re.compile(r"^[^a-z0-9]+|[^a-z0-9]+$")

STOPWORDS = frozenset(
    [
        "a",
        "about",
        "above",
        "after",
        "again",
        "against",
        "all",
        "almost",
        "also",
        "although",
        "always",
        "am",
        "among",
        "an",
        "and",
        "another",
        "any",
        "anyone",
        "anything",
        "are",
        "aren",
        "around",
        "as",
        "at",
        "away",
        "back",
        "be",
        "became",
        "because",
        "become",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "but",
        "by",
        "can",
        "cannot",
        "could",
        "couldn",
        "did",
        "didn",
        "do",
        "does",
        "doesn",
        "doing",
        "don",
        "done",
        "down",
        "during",
        "each",
        "either",
        "else",
        "enough",
        "even",
        "ever",
        "every",
        "everyone",
        "everything",
        "few",
        "for",
        "from",
        "further",
        "get",
        "gets",
        "getting",
        "give",
        "given",
        "go",
        "goes",
        "going",
        "gone",
        "got",
        "gotten",
        "had",
        "hadn",
        "has",
        "hasn",
        "have",
        "haven",
        "having",
        "he",
        "her",
        "here",
        "hers",
        "herself",
        "him",
        "himself",
        "his",
        "how",
        "however",
        "i",
        "if",
        "in",
        "into",
        "is",
        "isn",
        "it",
        "its",
        "itself",
        "just",
        "kind",
        "know",
        "known",
        "last",
        "least",
        "less",
        "let",
        "like",
        "likely",
        "lot",
        "lots",
        "made",
        "make",
        "makes",
        "making",
        "many",
        "may",
        "me",
        "might",
        "mine",
        "more",
        "most",
        "much",
        "must",
        "my",
        "myself",
        "near",
        "need",
        "needs",
        "never",
        "new",
        "next",
        "no",
        "nor",
        "not",
        "nothing",
        "now",
        "of",
        "off",
        "often",
        "oh",
        "ok",
        "okay",
        "on",
        "once",
        "one",
        "only",
        "onto",
        "or",
        "other",
        "others",
        "our",
        "ours",
        "ourselves",
        "out",
        "over",
        "own",
        "past",
        "per",
        "perhaps",
        "please",
        "pretty",
        "quite",
        "rather",
        "re",
        "really",
        "said",
        "same",
        "say",
        "says",
        "see",
        "seem",
        "seems",
        "seen",
        "shall",
        "she",
        "should",
        "since",
        "so",
        "some",
        "someone",
        "something",
        "sometimes",
        "soon",
        "still",
        "such",
        "sure",
        "take",
        "taken",
        "than",
        "that",
        "the",
        "their",
        "theirs",
        "them",
        "themselves",
        "then",
        "there",
        "these",
        "they",
        "thing",
        "things",
        "think",
        "this",
        "those",
        "though",
        "through",
        "thus",
        "to",
        "today",
        "together",
        "tomorrow",
        "too",
        "took",
        "toward",
        "towards",
        "under",
        "until",
        "up",
        "upon",
        "us",
        "use",
        "used",
        "very",
        "via",
        "want",
        "wanted",
        "wants",
        "was",
        "wasn",
        "way",
        "we",
        "well",
        "went",
        "were",
        "weren",
        "what",
        "whatever",
        "when",
        "where",
        "whether",
        "which",
        "while",
        "who",
        "whom",
        "whose",
        "why",
        "will",
        "with",
        "within",
        "without",
        "won",
        "would",
        "wouldn",
        "yeah",
        "yes",
        "yesterday",
        "yet",
        "you",
        "your",
        "yours",
        "yourself",
        "yourselves",
        "feel",
        "feels",
        "felt",
        "great",
        "good",
        "nice",
        "lot",
        "thanks",
        "thank",
        "wow",
        "hey",
        "hi",
        "hello",
        "glad",
        "cool",
        "awesome",
        "amazing",
        "love",
        "loved",
        "loves",
        "lovely",
        "happy",
        "definitely",
        "totally",
        "absolutely",
        "actually",
        "especially",
        "recently",
        "currently",
        "also",
        "able",
    ]
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
