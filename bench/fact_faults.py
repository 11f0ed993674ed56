"""The faults the paper's guidelines for atomic facts name, found in a fact's text by
patterns: first or second person left in, a pronoun for a subject with nothing to resolve
it, a relative time with no date beside it, no participant named, chit-chat kept, and more
than one sentence in a fact.

The patterns are this benchmark's own, written for it: they do not reuse the `rules`
extractor's, so that extractor is not graded by its own rules. Each detector is a plain
yes/no on one text; `fault_rates` gives the share of facts with each.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from common.text.keywords import normalize_keywords

# Hyphenated compounds stay one word: "me-time" is no first person.
_WORD = re.compile(r"[A-Za-z]+(?:['-][A-Za-z]+)*")

# First and second person, contractions included; "US" in capitals is the country.
# fmt: off
_PERSONAL = frozenset([
    "i", "i'm", "i've", "i'd", "i'll", "me", "my", "mine", "myself", "we",
    "we're", "we've", "we'd", "we'll", "us", "our", "ours", "ourselves", "you", "you're",
    "you've", "you'd", "you'll", "your", "yours", "yourself", "yourselves",
])
# fmt: on

# A fact that opens on one of these names nobody: nothing before it can say who.
# fmt: off
_OPENING_PRONOUN = frozenset([
    "he", "he's", "he'd", "he'll", "she", "she's", "she'd", "she'll", "it", "it's",
    "they", "they're", "they've", "they'd", "they'll", "his", "her", "its", "their", "them",
    "him",
])
# fmt: on

_MONTH = (
    r"(?:January|February|March|April|May|June|July|August|September|October|November|"
    r"December|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)\.?"
)
# A date a reader can place: a year, a day with its month, a month with its year, ISO.
_ABSOLUTE = re.compile(
    rf"\b(?:1[89]|20)\d\d\b|\b\d{{1,2}}(?:st|nd|rd|th)? (?:of )?{_MONTH}\b|"
    rf"\b{_MONTH} \d{{1,2}}(?:st|nd|rd|th)?\b|\b\d{{4}}-\d\d-\d\d\b"
)
_UNIT = r"(?:days?|nights?|weeks?|weekends?|months?|years?)"
_SEASON_OR_DAY = (
    r"(?:week|weekend|month|year|night|morning|evening|summer|winter|spring|fall|autumn|"
    r"monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
)
_RELATIVE = re.compile(
    r"\b(?:yesterday|today|tonight|tomorrow|recently|lately|nowadays|"
    r"the other day|a while (?:back|ago)|"
    rf"(?:last|this|next|past|coming) {_SEASON_OR_DAY}|"
    rf"(?:earlier|later) this {_SEASON_OR_DAY}|"
    rf"(?:in|within) (?:the )?(?:a|an|one|two|three|four|five|six|a few|a couple of|\d+) "
    rf"{_UNIT}|"
    r"ago)\b",
    re.I,
)

# A participant doing no more than a social act: "Caroline thanked Melanie ...".
_SOCIAL_VERB = re.compile(r"(?:greet|thank|congratulat|bid|wave)\w*\b", re.I)
_SAYS_GREETING = re.compile(r"(?:says?|said) (?:hi|hello|goodbye|bye)\b", re.I)
# Words that say nothing about anyone's life: greetings, thanks, acknowledgements.
# fmt: off
_ACK = frozenset([
    "hey", "hello", "thank", "thanks", "bye", "goodbye", "wow", "cool", "nice", "great",
    "awesome", "okay", "sure", "yeah", "yep", "yes", "haha", "lol", "omg", "congrat",
    "congratulation", "totally", "absolutely", "glad", "happy", "hear", "good", "amazing",
    "lovely", "sweet", "agree", "agrees", "agreed", "chat", "talk", "soon", "care", "luck",
])
# fmt: on
_SENTENCE_END = re.compile(r"(?<!\bMr)(?<!\bMrs)(?<!\bMs)(?<!\bDr)(?<!\bSt)[.!?]+\s+(?=[A-Z])")


def _words(text: str) -> list[str]:
    return [w.replace("\u2019", "'") for w in _WORD.findall(text.replace("\u2019", "'"))]


def first_or_second_person(text: str) -> bool:
    """I, me, my, we, our, you, your ... left in the fact."""
    return any(w.lower() in _PERSONAL and w != "US" for w in _words(text))


def opening_pronoun(text: str) -> bool:
    """The fact opens on he, she, it, they (or his, her, its, their): its subject is nobody
    it names. A pronoun later in a fact usually follows the name it stands for, and a
    pattern cannot tell when it does not, so only the opening is counted."""
    words = _words(text)
    return bool(words) and words[0].lower() in _OPENING_PRONOUN


def unanchored_time(text: str) -> bool:
    """A relative time ("yesterday", "last Friday", "next month", "recently", "ago") with no
    absolute date anywhere in the fact."""
    return bool(_RELATIVE.search(text)) and not _ABSOLUTE.search(text)


def names_a_participant(text: str, participants: Sequence[str]) -> bool:
    """A participant named, by full name, first name, or a capitalised short form of three or
    more letters ("Mel" for Melanie)."""
    words = set(_words(text))
    words |= {w[: -len("'s")] for w in words if w.endswith("'s")}
    for name in participants:
        if name in text:
            return True
        first = name.split()[0]
        if any(len(w) >= 3 and w[0].isupper() and first.startswith(w) for w in words):
            return True
    return False


def chit_chat(text: str, participants: Sequence[str]) -> bool:
    """A greeting, thanks or acknowledgement kept as a fact: no content word beyond such
    words and names ("Thanks, Mel!", "Wow, so cool!"), or a participant named doing no
    more than a social act ("Caroline thanked Melanie for the compliment")."""
    stripped = text.strip().strip("\"'")
    for name in participants:
        for token in {name, name.split()[0]}:
            for pattern in (_SOCIAL_VERB, _SAYS_GREETING):
                if re.match(rf"{re.escape(token)}(?: and \w+)? {pattern.pattern}", stripped, re.I):
                    return True
    firsts = [name.split()[0].lower() for name in participants]
    keywords = normalize_keywords([stripped], participants)
    return not [k for k in keywords if k not in _ACK and not any(f.startswith(k) for f in firsts)]


def several_sentences(text: str) -> bool:
    """More than one sentence in one fact."""
    return bool(_SENTENCE_END.search(text.strip()))


Detector = Callable[[str, Sequence[str]], bool]

FAULTS: dict[str, Detector] = {
    "first_or_second_person": lambda t, _: first_or_second_person(t),
    "opening_pronoun": lambda t, _: opening_pronoun(t),
    "unanchored_time": lambda t, _: unanchored_time(t),
    "no_named_participant": lambda t, p: not names_a_participant(t, p),
    "chit_chat": chit_chat,
    "several_sentences": lambda t, _: several_sentences(t),
}


def faults_of(text: str, participants: Sequence[str]) -> list[str]:
    """The names of the faults a fact has, in `FAULTS` order."""
    return [name for name, found in FAULTS.items() if found(text, participants)]


def fault_counts(facts: Sequence[tuple[str, Sequence[str]]]) -> dict[str, int]:
    """How many of the facts (text, the conversation's participants) have each fault."""
    counts = dict.fromkeys(FAULTS, 0)
    for text, participants in facts:
        for name in faults_of(text, participants):
            counts[name] += 1
    return counts


def rates(counts: dict[str, int], facts: int) -> dict[str, float | None]:
    """Each fault's share of the facts, in % (None with no facts)."""
    return {name: round(100 * n / facts, 2) if facts else None for name, n in counts.items()}
