"""Facts from chat turns for the offline `rules` backend: each sentence that says something,
rewritten so it names the person it is about, its opening pronoun resolved, its time anchored.

Every step is a small pattern table and a function that applies it, in the order a turn goes
through them: split into sentences, strip interjections and forms of address, drop chit-chat
and questions, rewrite first and second person as names, give a subjectless sentence its
speaker, resolve an opening pronoun from what came before (this turn, then the previous one),
join a later sentence that opens on "it", "this" or "that" to the fact before it, drop a
sentence said only of the listener (a reaction), name the speaker where the fact names
nobody, keep with the first fact the question the turn answers, anchor relative times
against the session day.
"""

from __future__ import annotations

import re
from datetime import date

from common.llm.contracts import ExtractedFact, ExtractionWindow
from common.models.session import Turn
from common.settings import RulesSettings
from common.text.keywords import STOPWORDS, normalize_keywords
from common.text.timeanchor import anchor_text, format_day

_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'])")

# Words that open a sentence without adding to it: "Wow, ...", "Yeah, ...", "Oh ...".
_INTERJECTION = (
    r"(?:hey|hi|hello|wow|whoa|oh|ooh|ah|aw+|aww+|yeah|yes|yep|yup|no (?:worries|problem)|no|"
    r"nope|nah|ok|okay|sure|haha+|hah|lol|omg|well|so|hmm+|mm+|um+|gosh|man|dude|thanks|"
    r"thank you|thanks so much|"
    r"totally|absolutely|definitely|exactly|true|right|cool|nice|great|awesome|amazing|"
    r"congrats|congratulations|indeed|anyway|anyways|btw|by the way|honestly|oh my|"
    r"oh wow|yay|phew|ugh|sweet|aha|yikes|dang|geez|and|but|plus|also|now|guess what|"
    r"long time no (?:see|talk|chat|speak))"
)
_OPENER = re.compile(rf"^{_INTERJECTION}\b(?!\s+for\b)[,!.\s\u2013\u2014-]*(?=\S)", re.I)

# A whole sentence that only greets, thanks, agrees or signs off.
_SOCIAL = re.compile(
    r"^(?:hey|hi|hello|bye|goodbye|see (?:you|ya)|talk (?:to you )?(?:soon|later)|"
    r"take care|good (?:night|morning|luck)|have a (?:good|great|nice)|catch you|"
    r"thanks?|thank you|congrat\w*|you too|same here|me too|no problem|no worries|"
    r"sounds (?:good|great|fun|amazing|awesome)|glad to hear|good to (?:hear|see)|"
    r"nice to|can't wait|keep (?:it )?up|keep me posted|let me know|"
    r"(?:that|this|it)(?:'s| is| was| sounds| looks| seems)(?: so| really| very| super|"
    r" pretty| such| absolutely| totally| just)* (?:a )?(?:great|awesome|cool|amazing|nice|"
    r"wonderful|lovely|fantastic|incredible|beautiful|sweet|fun|exciting|good|"
    r"impressive|inspiring|tough|hard|rough|crazy|wild|so true|true|gorgeous|stunning|"
    r"adorable|cute|brave|huge|interesting))\b[^.!?]{0,30}[.!?]*$",
    re.I,
)
# A whole sentence, of any length, that wishes, urges or exclaims rather than tells: "Take it
# easy and keep going", "Let's stay in touch", "Thanks for showing us", "What a moment!".
_NO_FACT = re.compile(
    r"^(?:take care|take it easy|enjoy\b|stay (?:safe|strong|positive|tuned|in touch|cool)|"
    r"keep (?:going|at it|pushing|rocking|it up|up the|me posted|us posted|in touch)|"
    r"feel free|let's|have (?:fun|a blast)|hang in|(?:best of |good )luck|go for it|"
    r"don't (?:hesitate|give up|forget)|thanks?(?: you)?(?: so much| a lot)? for|"
    r"what an? |tell (?:me|us) more)",
    re.I,
)
# A guess at how something went for the other person: "That must have been scary", "Those
# places must've been amazing", "Seeing it all come together must be rewarding".
_GUESS = re.compile(r"\bmust(?:'ve| have)? (?:been|be|feel|have felt)\b", re.I)
# The speaker saying what they did: "We went to the beach", "I also got this trophy".
_DEED = re.compile(
    r"^(?:I|We|Just)\b(?: (?:also|even|just|finally|recently))? (?:went|made|got|won|bought|"
    r"adopted|started|joined|finished|moved|met|tried|learned|painted|wrote|visited|took|"
    r"attended|baked|cooked|built|played|read|ran|signed|saw)\b",
)
# A thing the sentence names: a capitalised word after its first ("I was in Chicago"), or a
# quoted title. One such keyword is a fact where one common word is not ("It was awesome").
_NAMED_THING = re.compile(r"(?<=\S )[A-Z][a-z][\w-]*|\"[^\"]+\"")
# A goodbye that sets a meeting: "See you tomorrow at the pub" is a plan, not a pleasantry.
_SEE_YOU = re.compile(r"^see (?:you|ya) (?=(?:tomorrow|tonight|on|next|this|at|in|there)\b)", re.I)
# A question tagged onto a statement: "Sunflowers mean warmth, right?" states its first part.
_TAG_QUESTION = re.compile(
    r",\s*(?:right|huh|eh|yeah|you know|don't you think|isn't it|aren't they|wasn't it|"
    r"didn't it|don't they|am I right)\?$",
    re.I,
)

# "I am" -> "X is": verb forms that change when the subject becomes a third person.
_FIRST_PERSON = [
    (r"\b([Dd])o I\b", r"\1oes {s}"),
    (r"\b([Hh])ave I\b", r"\1as {s}"),
    (r"\bAm I\b", "Is {s}"),
    (r"\bam I\b", "is {s}"),
    (r"\bI'm\b|\bI am\b", "{s} is"),
    (r"\bI've\b|\bI have\b", "{s} has"),
    (r"\bI'll\b|\bI will\b", "{s} will"),
    (r"\bI'd\b", "{s} would"),
    (r"\bI was\b", "{s} was"),
    (r"\bI do\b", "{s} does"),
    (r"\bI don't\b", "{s} doesn't"),
    (r"\bI\b", "{s}"),
    (r"\bmyself\b", "{s}"),
    (r"\b[Mm]y\b", "{s}'s"),
    (r"\b[Mm]ine\b", "{s}'s"),
    (r"\b[Mm]e\b(?!-)", "{s}"),
    (r"\b[Ww]e're\b|\b[Ww]e are\b", "{s} and others are"),
    (r"\b[Ww]e've\b|\b[Ww]e have\b", "{s} and others have"),
    (r"\b[Ww]e were\b", "{s} and others were"),
    (r"\b[Ww]e'll\b", "{s} and others will"),
    (r"\b[Ww]e\b", "{s} and others"),
    (r"\b[Oo]ur\b", "{s}'s"),
    (r"\b[Oo]urselves\b", "themselves"),
    (r"\b[Uu]s\b", "{s} and others"),
]
# "We" and "our" of the two who talk, where nobody else can be meant: "since we last
# chatted", "we last spoke", "our last chat" ("our friendship" may be a team's).
_TALKED = r"(?:talked|talk|chatted|chat|spoke|speak|caught up|hung out)\b"
_BOTH_OF_US = [
    (rf"\b(?<=[Ss]ince )we(?= (?:last )?{_TALKED})|\b[Ww]e(?= last {_TALKED})", "{s} and {l}"),
    (r"\b[Oo]ur(?= (?:last )?(?:chats?|talks?|conversations?)\b)", "{s} and {l}'s"),
]
_SECOND_PERSON = [
    (r"\b([Dd])o you\b(?! all| guys)", r"\1oes {l}"),
    (r"\b([Hh])ave you\b(?! all| guys)", r"\1as {l}"),
    (r"\b[Yy]ou (?:all|guys)\b|\b[Yy]'all\b", "{l} and others"),
    (r"\b[Yy]ou're\b|\b[Yy]ou are\b", "{l} is"),
    (r"\b[Yy]ou've\b|\b[Yy]ou have\b", "{l} has"),
    (r"\b[Yy]ou'll\b", "{l} will"),
    (r"\b[Yy]ou'd\b", "{l} would"),
    (r"\b[Yy]ou were\b", "{l} was"),
    (r"\b[Yy]ou don't\b", "{l} doesn't"),
    (r"\b[Yy]our\b", "{l}'s"),
    (r"\b[Yy]ourself\b", "{l}"),
    (r"\b[Yy]ou\b", "{l}"),
]

# fmt: off
_BASE_VERBS = frozenset([
    "adore", "agree", "appreciate", "believe", "buy", "cook", "do", "drive", "eat", "enjoy",
    "feel", "find", "get", "go", "guess", "hate", "have", "hope", "keep", "know", "like",
    "live", "love", "make", "mean", "miss", "need", "own", "paint", "plan", "play", "prefer",
    "read", "remember", "run", "see", "study", "take", "teach", "think", "try", "use",
    "visit", "volunteer", "want", "watch", "wish", "work", "write", "admire", "bet", "can't",
    "dig", "wonder", "hear", "look", "say", "call", "put", "cope", "relax", "stay",
    "understand", "bring", "cherish", "give", "promise", "care", "advise", "start", "come",
    "decide", "donate", "practice", "mentor", "recommend", "haven't",
])
# fmt: on
# Where a name after a rewrite is a clause's subject, so its verb agrees with it.
_CLAUSE_START = r"\b(?:and|but|that|when|because|so|if|as|since|while|where|though|or)"
_ADVERBS = "(?:(?:now|also|really|still|always|usually|often|just|never|only|actually|totally) )?"

# A sentence with its subject left out: "Gonna continue my edu", "Loving the view".
_SUBJECTLESS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"^(?:gonna|going to)\b", re.I), "{s} is going to"),
    (re.compile(r"^(?:been)\b", re.I), "{s} has been"),
    (re.compile(r"^(?:just|finally|recently) (?=\w+ed\b)", re.I), "{s} "),
    (
        re.compile(
            r"^(?=(?:thinking|planning|hoping|trying|looking|working|researching|loving|"
            r"enjoying|getting|starting|learning|feeling|taking|heading|reading|watching|"
            r"practicing|training|saving|volunteering|considering)\b)",
            re.I,
        ),
        "{s} is ",
    ),
    (
        re.compile(
            r"^(?=(?:had|went|got|made|took|did|tried|started|finished|spent|visited|bought|"
            r"found|joined|signed|met|saw|loved|enjoyed|learned|decided|managed)\b)",
            re.I,
        ),
        "{s} ",
    ),
]

_GERUND_SUBJECT = re.compile(
    r"^\w+ing\b.*?\b(?:is|was|are|were|looks|seems|sounds|feels|makes|made|helps|helped|"
    r"means|can|will|has|had|gives|keeps|brings)\b",
    re.I,
)

# Who a "he", "she" or "they" can stand for: a named person's relative or a name.
_FEMALE = (
    r"mom|mother|mum|sister|daughter|wife|girlfriend|grandma|grandmother|aunt|niece|"
    r"stepmom|stepdaughter|sis"
)
_MALE = r"dad|father|brother|son|husband|boyfriend|grandpa|grandfather|uncle|nephew|stepdad"
_EITHER = (
    r"friend|best friend|partner|boss|teacher|coworker|colleague|neighbou?r|mentor|cousin|"
    r"coach|therapist|roommate|buddy|pal|kid|child|baby|classmate|teammate"
)
_PLURAL = (
    r"kids|children|parents|friends|family|sons|daughters|siblings|brothers|sisters|"
    r"cousins|grandparents|coworkers|colleagues|students|classmates|teammates|neighbou?rs|"
    r"folks|pets|dogs|cats|team|band|group"
)
_OWNED = r"(?P<owner>[A-Z][a-z]+)'s (?:\w+ )?(?P<rel>{rel})\b"
_FEMALE_REF = re.compile(_OWNED.format(rel=_FEMALE + "|" + _EITHER))
_MALE_REF = re.compile(_OWNED.format(rel=_MALE + "|" + _EITHER))
_PLURAL_REF = re.compile(_OWNED.format(rel=_PLURAL))
# A capitalised word mid-sentence, not after a preposition of place ("moved to Lisbon").
_NAME = re.compile(
    r"(?<![Ii]n )(?<![Aa]t )(?<![Tt]o )(?<!from )(?<!near )(?<!visit )(?<!visited )"
    r"(?<=[a-z,;] )(?P<name>[A-Z][a-z]{2,})\b(?!'s)"
)
# fmt: off
_NOT_NAMES = frozenset([
    "I", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday",
    "January", "February", "March", "April", "May", "June", "July", "August", "September",
    "October", "November", "December", "God", "Christmas", "Easter", "Halloween",
    "Thanksgiving", "English", "Spanish", "French", "American",
])
# fmt: on

_OPENING_HE_SHE = re.compile(r"^(?:(?P<she>she|her)|(?P<he>he|him|his))\b(?P<rest>.*)$", re.I)
_OPENING_THEY = re.compile(r"^(?:they|them|their)\b", re.I)
# Any opening pronoun left once resolution is done: the speaker is named before it.
_OPENING_PRONOUN = re.compile(
    r"^(?:he|she|it|they|his|her|its|their|them|him|this|that|these|those)\b", re.I
)
_OPENING_THING = re.compile(r"^(?:it|this|that)\b(?!-)", re.I)
_POSSESSIVE_HER = re.compile(r"^her (?=[a-z]+ (?:is|was|are|were|has|had)\b)", re.I)

# Relative times the anchoring cannot turn into a date: said as of the session day.
_VAGUE_TIME = re.compile(
    r"\b(?:recently|lately|nowadays|these days|the other day|a while (?:back|ago)|"
    r"(?:a few|a couple of|several|some|\w+) (?:days|weeks|weekends|months|years) ago|"
    r"(?:last|this|next|past|coming) (?:summer|winter|spring|fall|autumn|weekend|"
    r"few (?:days|weeks|months|years))|"
    r"(?:earlier|later) this (?:week|month|year)|(?:in|within) (?:the )?(?:next|past) "
    r"(?:few )?(?:days|weeks|months|years)|"
    r"(?:in|within) (?:a few|a couple of|several) (?:days|weeks|months|years)|"
    r"soon|right now|at the moment|currently)\b",
    re.I,
)
_ABSOLUTE_DATE = re.compile(r"\b(?:1[89]|20)\d\d\b")
# The question a turn's first fact answers, as `question_answered` appends it.
_ASKED = re.compile(r" \([^()]{1,80} had asked: .*$")


def split_sentences(text: str) -> list[str]:
    text = text.replace("\u2019", "'").replace("\u2018", "'")  # "I’m" reads as "I'm"
    return [s.strip() for s in _SENTENCE.split(text.strip()) if s.strip()]


def _short_forms(participants: list[str]) -> str:
    """A participant by full name, first name or a three-letter-or-longer prefix ("Mel")."""
    forms = set()
    for name in participants:
        forms.add(re.escape(name))
        first = name.split()[0]
        forms.update(re.escape(first[:n]) for n in range(3, len(first) + 1))
    return "|".join(sorted(forms, key=len, reverse=True))


def strip_address(sentence: str, participants: list[str]) -> str:
    """Drop interjections and the name a sentence is addressed to: "Wow, Mel! ..." -> "..."."""
    names = _short_forms(participants)
    # a name said to someone, set off by a comma, "!" or a dash: "Mel, …" (not "Tom adopted …")
    vocative_front = re.compile(rf"^(?:{names})\b(?:\s*[,!.]+|\s+[-\u2013\u2014]+)\s*(?=\S)")
    vocative_back = re.compile(rf",\s*(?:{names})\s*(?=[.!?]*$)")
    out = sentence
    while True:
        before = out
        out = _OPENER.sub("", out)
        out = vocative_front.sub("", out)
        if out == before:
            break
    out = vocative_back.sub("", out).strip()
    return out[:1].upper() + out[1:] if out else out


def is_chit_chat(
    sentence: str, participants: list[str], min_words: int, min_keywords: int = 2
) -> bool:
    """A question, a greeting, thanks, praise or sign-off, or too few words to hold a fact
    (fewer than `min_keywords` content words, unless one content word is enough: the
    speaker says what they did, "We went to the beach", or names something, "I was in
    Chicago")."""
    if sentence.endswith("?") or _SOCIAL.match(sentence) or _NO_FACT.match(sentence):
        return True
    if _GUESS.search(sentence):  # "That must have been scary": of the other, and no fact
        return True
    if len(sentence.split()) < min_words:
        return True
    keywords = len(normalize_keywords([sentence], participants))
    if keywords >= min_keywords:
        return False
    return not (keywords == 1 and _tells_one_thing(sentence, participants))


def _tells_one_thing(sentence: str, participants: list[str]) -> bool:
    """One content word holds a fact where the speaker says what they did ("We went to the
    beach") or it names a place, a person or a title ("I was in Chicago")."""
    if _DEED.match(sentence):
        return True
    return any(_someone_else(m.group(0), participants) for m in _NAMED_THING.finditer(sentence))


def _someone_else(word: str, participants: list[str]) -> bool:
    """A capitalised word that may name a person, place or thing: no participant's first
    name, weekday, month or holiday."""
    return word not in _NOT_NAMES and word not in {p.split()[0] for p in participants}


def _third_person_verb(verb: str) -> str:
    if verb == "have":
        return "has"
    if verb == "haven't":
        return "hasn't"
    if verb == "can't":
        return verb
    if verb.endswith(("s", "sh", "ch", "x", "o")):
        return verb + "es"
    if verb.endswith("y") and verb[-2:-1] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def agree(text: str, subject: str) -> str:
    """'Priya love hiking' -> 'Priya loves hiking' for common verbs after a rewritten 'I'."""

    def fix(m: re.Match[str]) -> str:
        verb = m.group(2)
        if verb.lower() not in _BASE_VERBS:
            return m.group(0)
        return f"{m.group(1)}{_third_person_verb(verb.lower())}"

    pattern = (
        rf"((?:^|[,;:\u2013\u2014-] |{_CLAUSE_START} ){re.escape(subject)} {_ADVERBS})([a-z']+)\b"
    )
    return re.sub(pattern, fix, text)


# "I" is always a subject, so the verb after it agrees with the name that replaces it
# ("how much I need them" -> "how much Melanie needs them", "that's how I feel" -> "that's
# how Melanie feels"), unless the word before it takes the bare verb (a question's "Can I
# bring …", "Should I …").
_I_VERB = re.compile(rf"(?<![\w'])(?P<before>\w+ )?I (?P<adverb>{_ADVERBS})(?P<verb>[a-z']+)\b")
# fmt: off
_ASKS = frozenset([
    "can", "could", "will", "would", "should", "shall", "may", "might", "must", "do", "does",
    "did", "have", "has", "had", "am", "was", "let", "make", "help", "to",
])
# fmt: on


def _speaker_agrees(sentence: str, speaker: str) -> str:
    def fix(m: re.Match[str]) -> str:
        before, verb = m.group("before") or "", m.group("verb")
        if verb.lower() not in _BASE_VERBS or before.strip().lower() in _ASKS:
            return m.group(0)
        return f"{before}{speaker} {m.group('adverb')}{_third_person_verb(verb.lower())}"

    return _I_VERB.sub(fix, sentence)


def third_person(sentence: str, speaker: str, listener: str | None) -> str:
    """First person as the speaker's name, second person as the listener's."""
    out = _speaker_agrees(sentence, speaker)
    if listener:
        for pattern, repl in _BOTH_OF_US:
            out = re.sub(pattern, repl.format(s=speaker, l=listener), out)
    for pattern, repl in _FIRST_PERSON:
        out = re.sub(pattern, repl.format(s=speaker), out)
    if listener:
        for pattern, repl in _SECOND_PERSON:
            out = re.sub(pattern, repl.format(l=listener), out)
        out = agree(out, listener)
    return agree(out, speaker)


def give_subject(sentence: str, speaker: str) -> str:
    """A sentence that leaves its subject out gets the speaker: "Loving it" -> "X is loving it".
    A gerund followed by its own verb is the subject already ("Taking care of it is vital")."""
    if _GERUND_SUBJECT.match(sentence):
        return sentence
    for pattern, repl in _SUBJECTLESS:
        m = pattern.match(sentence)
        if m:
            rest = sentence[m.end() :]
            return agree(repl.format(s=speaker) + rest[:1].lower() + rest[1:], speaker)
    first = sentence.split(" ", 1)[0].lower()
    if first in _BASE_VERBS and first not in {"do", "can't"}:
        return agree(f"{speaker} {sentence[:1].lower()}{sentence[1:]}", speaker)
    return sentence


def referents(text: str, participants: list[str]) -> list[str]:
    """The people a later "he", "she" or "they" may stand for, in order of mention."""
    found: list[tuple[int, str]] = []
    for pattern in (_FEMALE_REF, _MALE_REF, _PLURAL_REF):
        found.extend((m.start(), m.group(0)) for m in pattern.finditer(text))
    for m in _NAME.finditer(text):
        if _someone_else(m.group("name"), participants):
            found.append((m.start(), m.group("name")))
    return [phrase for _, phrase in sorted(found)]


def _latest(mentions: list[str], pattern: re.Pattern[str]) -> str | None:
    """The most recent mention a pronoun can stand for: a matching relative, else a name."""
    relatives = [p for p in mentions if pattern.fullmatch(p)]
    if relatives:
        return relatives[-1]
    names = [p for p in mentions if "'" not in p]
    return names[-1] if names else None


def resolve_opening(sentence: str, mentions: list[str]) -> str:
    """An opening he, she or they replaced by the person it stands for, where one was named
    before (this turn, or the turn before it); otherwise the sentence as it is."""
    m = _OPENING_HE_SHE.match(sentence)
    if m:
        pattern = _FEMALE_REF if m.group("she") else _MALE_REF
        who = _latest(mentions, pattern)
        if who is not None:
            word = sentence.split(" ", 1)[0].lower()
            possessive = word == "his" or bool(_POSSESSIVE_HER.match(sentence))
            name = who + ("'s" if possessive and not who.endswith("'s") else "")
            return name + m.group("rest")
    if _OPENING_THEY.match(sentence):
        who = _latest(mentions, _PLURAL_REF)
        if who is not None and "'" in who:
            word = sentence.split(" ", 1)[0].lower()
            rest = sentence[len(word) :]
            return (who + "'s" if word == "their" else who) + rest
    return sentence


def _lower_first(sentence: str, proper_words: set[str]) -> str:
    """The sentence's first letter lowered after "X says", unless its first word may be a
    name: lowered only for a common word (a stopword, or an -ing, -ed or -ly word)."""
    first = re.sub(r"(?:'(?:s|ll|re|ve|d|m)|\u2019s)?[,.!]*$", "", sentence.split(" ", 1)[0])
    common = first.lower() in STOPWORDS or first.lower().endswith(("ing", "ed", "ly"))
    if first in proper_words or first.isupper() or not common:
        return sentence
    return sentence[:1].lower() + sentence[1:]


def said_of_listener(text: str, sentence: str, speaker: str, listener: str | None) -> bool:
    """The rewrite named the listener and not the speaker: a "you" sentence, a reaction."""
    return listener is not None and text != sentence and listener in text and speaker not in text


def names_someone(text: str, participants: list[str]) -> bool:
    return re.search(rf"\b(?:{_short_forms(participants)})\b", text) is not None


def anchor(text: str, day: date) -> str:
    """Relative times as dates; a vague one ("recently") said as of the session day."""
    out, _ = anchor_text(text, day)
    if _VAGUE_TIME.search(out) and not _ABSOLUTE_DATE.search(out):
        out = out.rstrip(".!") + f", as of {format_day(day)}"
    return out


def _finish(text: str, max_chars: int) -> str:
    text = text.strip()
    text = re.sub(r"[!]+$", ".", text)
    text = text[:max_chars].strip()
    if text and text[-1] not in ".":
        text += "."
    return text[:1].upper() + text[1:]


def caption_fact(speaker: str, caption: str) -> str:
    thing = re.sub(
        r"^(?:a |an )?(?:photo|photograph|photography|picture|image|pic) of ",
        "",
        caption.strip(),
        flags=re.I,
    )
    return f"{speaker} shared a photo of {thing.rstrip('.')}."


def _proper_words(text: str) -> set[str]:
    """Words a turn capitalises mid-sentence: proper names to keep capitalised."""
    return {m.group(1) for m in re.finditer(r"(?<=[a-z,;] )([A-Z][\w-]*)", text)} | {"I"}


# "Do you …?" -> "Does Priya …?": the auxiliary before a name that was "you".
_AUXILIARY = "[Dd]o|[Hh]ave|[Aa]re|[Ww]ere"
_SINGULAR = {"do": "does", "have": "has", "are": "is", "were": "was"}


def _singular(m: re.Match[str]) -> str:
    word = _SINGULAR[m.group(1).lower()]
    return word.capitalize() if m.group(1)[0].isupper() else word


def question_answered(previous: Turn | None, speaker: str, participants: list[str]) -> str | None:
    """What the other person asked just before this turn, as "X had asked: …", named in the
    third person: the turn's first fact answers it ("It felt crazy" says little until "How
    did it feel to seal the deal?" stands beside it)."""
    if previous is None or previous.speaker == speaker:
        return None
    # a tagged statement ("Nature is amazing, isn't it?") asks nothing the turn answers
    sentences = split_sentences(previous.text)
    questions = [s for s in sentences if s.endswith("?") and not _TAG_QUESTION.search(s)]
    if not questions:
        return None
    question = strip_address(questions[-1], participants)
    if len(question.split()) < 3:  # "You?", "Really?": nothing to add
        return None
    asked = third_person(question, previous.speaker, speaker)
    asked = re.sub(rf"\b({_AUXILIARY})(?= {re.escape(speaker)}\b(?!'))", _singular, asked)
    return f"{previous.speaker} had asked: {asked}"


def statement(fact: str) -> str:
    """A fact without the question it answers: what it says of its subject."""
    m = _ASKED.search(fact)
    return fact[: m.start()] + "." if m else fact


def turn_facts(
    turn: Turn,
    previous: Turn | None,
    listener: str | None,
    participants: list[str],
    day: date,
    rules: RulesSettings,
) -> list[str]:
    """The facts one turn states, each naming who it is about."""
    proper_words = _proper_words(turn.text) | set(participants)
    mentions: list[str] = []  # who an opening he, she or they may stand for, oldest first
    if previous is not None:
        before = third_person(previous.text, previous.speaker, turn.speaker)
        mentions = referents(before, participants)
    facts: list[str] = []
    asked = question_answered(previous, turn.speaker, participants)
    for raw in split_sentences(turn.text):
        sentence = strip_address(_TAG_QUESTION.sub(".", raw), participants)
        if listener is not None:
            sentence = _SEE_YOU.sub(f"{turn.speaker} will see {listener} ", sentence)
        # a sentence that goes on with the one before needs one content word of its own
        goes_on = bool(facts) and _OPENING_THING.match(sentence) is not None
        least = 1 if goes_on else 2
        # an answer's first sentence may be a bare phrase beside its question ("Max and Daisy.")
        fewest = 2 if asked is not None and not facts else rules.min_fact_words
        if not sentence or is_chit_chat(sentence, participants, fewest, least):
            continue
        text = third_person(give_subject(sentence, turn.speaker), turn.speaker, listener)
        # A sentence said only of the listener ("You'd be a great counselor", "Your drive to
        # help is awesome") reacts to what they told: chit-chat, which took the places of
        # facts in a question's top ten (bench/README, round five).
        if said_of_listener(text, sentence, turn.speaker, listener):
            continue
        text = resolve_opening(text, mentions)
        mentions.extend(referents(text, participants))
        # "It", "this" or "that" opening a later sentence of the turn goes on with what the
        # sentence before it said: one fact, its subject kept ("X makes honey chicken a lot;
        # it's one of X's favorites"), not a second that names nothing.
        if goes_on:
            facts[-1] = f"{facts[-1].rstrip('.!')}; {text[:1].lower()}{text[1:]}"
            continue
        # A fact that names nobody, opens on a pronoun nothing resolved, or names only the
        # listener once resolved ("She must love Lisbon" of the listener's sister) is what
        # the speaker says: a named speaker ranks better than a subjectless sentence.
        if (
            not names_someone(text, participants)
            or _OPENING_PRONOUN.match(text)
            or said_of_listener(text, sentence, turn.speaker, listener)
        ):
            text = f"{turn.speaker} says {_lower_first(text, proper_words)}"
        facts.append(text)
    out = [_finish(anchor(f, day), rules.max_fact_chars) for f in facts]
    if out and asked is not None:
        out[0] = _finish(f"{out[0][:-1]} ({anchor_text(asked, day)[0]})", rules.max_fact_chars)
    if turn.image_caption and turn.image_caption.strip():
        caption = caption_fact(turn.speaker, turn.image_caption)
        out.append(_finish(anchor(caption, day), rules.max_fact_chars))
    return out


def listener_of(turn: Turn, window: ExtractionWindow) -> str | None:
    """Whom a turn addresses: the other participant, or the last one who spoke before it."""
    others = [p for p in window.participants if p != turn.speaker]
    if len(others) == 1:
        return others[0]
    for prev in reversed(window.context + window.turns):
        if prev.speaker != turn.speaker and prev is not turn:
            return prev.speaker
    return None


def extract_window(window: ExtractionWindow, rules: RulesSettings) -> list[ExtractedFact]:
    """Facts of every turn of a window, the turn before each as its context."""
    day = window.started_at.date()
    ordered = window.context + window.turns
    out: list[ExtractedFact] = []
    for index, turn in enumerate(ordered):
        if index < len(window.context):
            continue
        assert turn.id is not None
        previous = ordered[index - 1] if index > 0 else None
        listener = listener_of(turn, window)
        for text in turn_facts(turn, previous, listener, window.participants, day, rules):
            out.append(ExtractedFact(text=text, turn_ids=[turn.id]))
    return out
