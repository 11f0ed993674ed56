"""The lexical channel: BM25 over normalised terms, with IDF over the space it indexes.

Terms are the word tokens of a text (letters and digits, with their combining marks, so
Devanagari or vowelled Arabic words stay whole), case-folded, stop words out. Latin-script
words lose their accents and are reduced to their Snowball stem (the keywords' match key),
so "playing", "plays" and "play" are one term, and "café" and "cafe" another. Scripts
written without spaces (Chinese, Japanese, Thai) give one term per run of characters, which
rarely matches: the dense score ranks them. A text with no term (only stop words,
punctuation or emoji) scores 0 everywhere, and is not counted as a document.

`Bm25` keeps the postings of one kind of record incrementally (rows are the space index's
row numbers), so IDF and the average length always describe the live rows. Its scores,
for a query's terms q and a row d of length |d| among N live rows with average length avgdl:

    idf(t)    = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))
    BM25(q,d) = Σ_{t∈q} idf(t) · tf(t,d)·(k1+1) / (tf(t,d) + k1·(1 - b + b·|d|/avgdl))
    L(q,d)    = min(1, BM25(q,d) / Σ_{t∈q} idf(t))

L is the IDF-weighted share of the query's terms the row holds: 1 when a row of average
length holds every query term once. It is on the [0, 1] scale of the paper's keyword Jaccard,
so S_h = α·cos + β·L stays in the range its thresholds read; it scores close paraphrases
higher than Jaccard did (bench/README.md, "The lexical channel").
"""

from __future__ import annotations

import pickle
import re
import unicodedata
from collections import Counter
from collections.abc import Collection, Iterable

import numpy as np

from common.postings import Posting
from common.text.keywords import STOPWORDS, match_key


def _marks() -> str:
    """The combining marks of the Basic Multilingual Plane as a character class body:
    Python's \\w leaves them out, and words of many scripts carry them inside."""
    ranges: list[tuple[int, int]] = []
    for code in range(0x300, 0x10000):
        if unicodedata.category(chr(code)) in ("Mn", "Mc", "Me"):
            if ranges and ranges[-1][1] == code - 1:
                ranges[-1] = (ranges[-1][0], code)
            else:
                ranges.append((code, code))
    return "".join(f"\\u{a:04x}-\\u{b:04x}" for a, b in ranges)


# Word tokens in any script: a letter or digit, then letters, digits and combining marks (no
# underscore, no apostrophe, so "Caroline's" gives "caroline" and a dropped "s").
_WORD = re.compile(rf"[^\W_](?:[^\W_]|[{_marks()}])*")
_LATIN = re.compile(r"[a-z0-9]+")
# Terms read from one text at most: a very long text costs a bounded amount and its tail
# adds little a search would find only through it.
MAX_TERMS = 512
MAX_TOKEN_CHARS = 40


def terms(text: str, limit: int = MAX_TERMS) -> list[str]:
    """The text's terms in order (repeats kept, at most `limit`)."""
    out: list[str] = []
    for match in _WORD.finditer(unicodedata.normalize("NFKC", text).casefold()):
        token = _latin(match.group())
        if len(token) < 2 or len(token) > MAX_TOKEN_CHARS or token in STOPWORDS:
            continue
        out.append(match_key(token) if _LATIN.fullmatch(token) else token)
        if len(out) >= limit:
            break
    return out


def _latin(token: str) -> str:
    """A Latin-script word without its accents ("café" → "cafe"); other words as they are."""
    if token.isascii():
        return token
    bare = "".join(c for c in unicodedata.normalize("NFKD", token) if not unicodedata.combining(c))
    return bare if bare.isascii() else token


def _text_and_keyword_terms(text: str, keywords: Iterable[str]) -> list[str]:
    found = terms(text)
    for keyword in keywords:
        found.extend(terms(keyword, limit=8))
    return found


def document_terms(text: str, keywords: Iterable[str] = ()) -> Counter[str]:
    """A record's term frequencies: its text, plus its keywords as a second field (an
    extractor's keyword need not occur in the text; one that does counts twice)."""
    return Counter(_text_and_keyword_terms(text, keywords))


def query_terms(text: str, keywords: Iterable[str] = ()) -> frozenset[str]:
    """A query's distinct terms: those of its text and of its keywords."""
    return frozenset(_text_and_keyword_terms(text, keywords))


class Bm25:
    """Postings, lengths and document frequencies of the live rows of one kind of record."""

    def __init__(self) -> None:
        # a row's term counts; in an index read from its saved copy, their pickle until the
        # row is next written (a saved index of 100k facts loads 0.7 s faster)
        self._docs: dict[int, Counter[str] | bytes] = {}
        self._postings: dict[str, Posting] = {}  # term -> rows, weighted by term frequency
        self._length = np.zeros(64, dtype=np.float32)
        self._total = 0

    @property
    def documents(self) -> int:
        return len(self._docs)

    @property
    def average_length(self) -> float:
        return self._total / len(self._docs) if self._docs else 0.0

    def df(self, term: str) -> int:
        return len(self._postings.get(term, ()))

    def idf(self, term: str) -> float:
        n, df = len(self._docs), self.df(term)
        return float(np.log1p((n - df + 0.5) / (df + 0.5)))

    def set(self, row: int, counts: Counter[str]) -> None:
        """Index `row` with these term frequencies, replacing what it held. A row without
        terms is not a document: it moves neither N nor the average length. Only the terms
        whose frequency changed touch their postings (a record rewritten with the same text,
        as a fact gaining an event is, touches none)."""
        old = self._counts(row)
        if old == counts:
            return
        if not counts:
            self.clear(row)
            return
        if row >= self._length.size:
            grown = np.zeros(max(self._length.size * 2, row + 1), dtype=np.float32)
            grown[: self._length.size] = self._length
            self._length = grown
        old = old or Counter()
        for term in old.keys() - counts.keys():
            self._drop(term, row)
        for term, tf in counts.items():
            if old.get(term) != tf:
                self._postings.setdefault(term, Posting()).put(row, tf)
        self._docs[row] = counts
        length = sum(counts.values())
        self._total += length - int(self._length[row])
        self._length[row] = length

    def clear(self, row: int) -> None:
        """Take `row` out (an erased or replaced record)."""
        if row not in self._docs:
            return
        counts = self._counts(row) or Counter()
        del self._docs[row]
        self._total -= int(self._length[row])
        self._length[row] = 0
        for term in counts:
            self._drop(term, row)

    def _counts(self, row: int) -> Counter[str] | None:
        """The row's term counts (unpacked for this read only: a reader never writes)."""
        counts = self._docs.get(row)
        if isinstance(counts, bytes):
            return Counter(pickle.loads(counts))
        return counts

    def __getstate__(self) -> dict[str, object]:
        state = dict(self.__dict__)
        state["_docs"] = {
            row: c if isinstance(c, bytes) else pickle.dumps(dict(c), protocol=5)
            for row, c in self._docs.items()
        }
        return state

    def _drop(self, term: str, row: int) -> None:
        posting = self._postings.get(term)
        if posting is not None:
            posting.drop(row)
            if not posting:
                del self._postings[term]

    def scores(self, query: Collection[str], n: int, k1: float, b: float) -> np.ndarray:
        """BM25(query, row) for rows 0..n-1 (0 for rows not indexed)."""
        out = np.zeros(n, dtype=np.float32)
        avgdl = self.average_length
        if not query or not self._docs or avgdl <= 0:
            return out
        length = self._length
        for term in query:
            posting = self._postings.get(term)
            if posting is None:
                continue
            rows, tf = posting.arrays()
            if rows.size and rows.max() >= n:  # rows added after this reader's n
                keep = rows < n
                rows, tf = rows[keep], tf[keep]
            norm = k1 * (1.0 - b + b * length[rows] / avgdl)
            out[rows] += self.idf(term) * tf * (k1 + 1.0) / (tf + norm)
        return out

    def scores_at(
        self, query: Collection[str], rows: np.ndarray, k1: float, b: float
    ) -> np.ndarray:
        """BM25(query, row) for `rows` alone, read from their own term counts: what `scores`
        gives them (to float precision) without scanning the query terms' postings."""
        out = np.zeros(rows.size, dtype=np.float32)
        avgdl = self.average_length
        if not query or not self._docs or avgdl <= 0:
            return out
        idf = {term: self.idf(term) for term in query if term in self._postings}
        if not idf:
            return out
        for i, row in enumerate(rows.tolist()):
            counts = self._counts(row)
            if not counts:
                continue
            norm = k1 * (1.0 - b + b * float(self._length[row]) / avgdl)
            total = 0.0
            for term, weight in idf.items():
                tf = counts.get(term)
                if tf:
                    total += weight * tf * (k1 + 1.0) / (tf + norm)
            out[i] = total
        return out

    def scan_cost(self, query: Collection[str]) -> int:
        """The postings `scores` reads for `query`: rows it touches."""
        return sum(len(self._postings.get(term, ())) for term in query)

    def normalised(
        self, query: Collection[str], n: int, k1: float, b: float, rows: np.ndarray | None = None
    ) -> np.ndarray:
        """L(query, row) in [0, 1] for rows 0..n-1 (for `rows` alone when given): BM25 over
        the query's summed IDF."""
        size = n if rows is None else rows.size
        if not query or not self._docs:
            return np.zeros(size, dtype=np.float32)
        ceiling = sum(self.idf(term) for term in query)
        raw = self.scores(query, n, k1, b) if rows is None else self.scores_at(query, rows, k1, b)
        out: np.ndarray = np.minimum(raw / np.float32(ceiling), np.float32(1.0))
        return out
