"""Anchoring time phrases ("yesterday", "last Friday", "next month", "7 May 2023") to dates.

Relative phrases are resolved against the session time with dateutil's relativedelta; a
phrase that cannot be resolved, or lands outside the calendar (years 1 to 9999), is left as
it is and yields no time, never "today" and never an error.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from dateutil import parser as date_parser
from dateutil.relativedelta import relativedelta

from common.models.memory import TimeRange

MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
MONTHS.update({name.lower(): i for i, name in enumerate(calendar.month_abbr) if name})
MONTHS.pop("may", None)
MONTHS["may"] = 5
MONTHS["sept"] = 9
WEEKDAYS = {name.lower(): i for i, name in enumerate(calendar.day_name)}
NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "couple of": 2,
    "a couple of": 2,
    "few": 3,
    "a few": 3,
}

_MONTH_RE = (
    r"(?P<month>january|february|march|april|may|june|july|august|september|october|november|"
    r"december|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec)\.?"
)
_WEEKDAY_RE = r"(?P<weekday>monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_NUM_RE = (
    r"(?P<num>\d{1,3}|a couple of|couple of|a few|few|an|a|one|two|three|four|five|six|seven|"
    r"eight|nine|ten|eleven|twelve)"
)
_UNIT_RE = r"(?P<unit>day|week|month|year)s?"


class TimeParseError(ValueError):
    """A session time string that no date format matches."""


def parse_session_time(value: str) -> datetime:
    """Parse a session timestamp such as '1:56 pm on 8 May, 2023' or ISO 8601."""
    text = value.strip()
    if not text:
        raise TimeParseError("session time is empty")
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        pass
    try:
        parsed: datetime = date_parser.parse(text.replace(" on ", " "), fuzzy=False)
        return parsed
    except (ValueError, OverflowError) as exc:
        raise TimeParseError(f"cannot read session time {value!r}: {exc}") from exc


def format_day(day: date) -> str:
    return f"{day.day} {calendar.month_name[day.month]} {day.year}"


def _day(d: date) -> TimeRange:
    return TimeRange(start=d, end=d)


def _month(year: int, month: int) -> TimeRange:
    last = calendar.monthrange(year, month)[1]
    return TimeRange(start=date(year, month, 1), end=date(year, month, last))


def _year(year: int) -> TimeRange:
    return TimeRange(start=date(year, 1, 1), end=date(year, 12, 31))


def _week_of(d: date) -> TimeRange:
    monday = d - timedelta(days=d.weekday())
    return TimeRange(start=monday, end=monday + timedelta(days=6))


def describe(span: TimeRange) -> str:
    """Words for an anchored span: 'on 7 May 2023', 'in May 2023', 'in 2023', 'between ...'."""
    start, end = span.start, span.end
    if start == end:
        return f"on {format_day(start)}"
    if (
        start.day == 1
        and start.month == end.month
        and start.year == end.year
        and (end.day == calendar.monthrange(end.year, end.month)[1])
    ):
        return f"in {calendar.month_name[start.month]} {start.year}"
    if (start.month, start.day, end.month, end.day) == (1, 1, 12, 31) and start.year == end.year:
        return f"in {start.year}"
    if (end - start).days == 1 and start.weekday() == 5:
        return f"on the weekend of {format_day(start)}"
    if (end - start).days == 6 and start.weekday() == 0:
        return f"in the week of {format_day(start)}"
    return f"between {format_day(start)} and {format_day(end)}"


@dataclass(frozen=True)
class TimeMention:
    """One time phrase found in a text and the span it denotes."""

    start: int
    end: int
    phrase: str
    span: TimeRange
    relative: bool


def _count(word: str) -> int:
    word = word.lower()
    return int(word) if word.isdigit() else NUMBERS[word]


def _shift(ref: date, unit: str, amount: int) -> TimeRange:
    if unit == "day":
        return _day(ref + timedelta(days=amount))
    if unit == "week":
        return _day(ref + timedelta(weeks=amount))
    if unit == "month":
        moved = ref + relativedelta(months=amount)
        return _month(moved.year, moved.month)
    moved = ref + relativedelta(years=amount)
    return _year(moved.year)


def _relative_unit(ref: date, which: str, unit: str) -> TimeRange:
    step = {"last": -1, "this": 0, "next": 1}[which]
    if unit == "week":
        return _week_of(ref + timedelta(weeks=step))
    if unit == "weekend":
        weekday = ref.weekday()
        if which == "this":
            saturday = ref + timedelta(days=5 - weekday)
        elif which == "next":
            saturday = ref + timedelta(days=(5 - weekday) % 7 or 7)
        else:
            saturday = ref - timedelta(days=(weekday - 5) % 7 or 7)
            if weekday == 6:
                saturday -= timedelta(days=7)
        return TimeRange(start=saturday, end=saturday + timedelta(days=1))
    if unit == "month":
        moved = ref + relativedelta(months=step)
        return _month(moved.year, moved.month)
    return _year(ref.year + step)


def _weekday(ref: date, which: str, weekday: int) -> TimeRange:
    if which == "last":
        delta = (ref.weekday() - weekday) % 7 or 7
        return _day(ref - timedelta(days=delta))
    if which == "next":
        delta = (weekday - ref.weekday()) % 7 or 7
        return _day(ref + timedelta(days=delta))
    return _day(ref - timedelta(days=ref.weekday()) + timedelta(days=weekday))


Resolver = Callable[[re.Match[str], date], TimeRange | None]


def _abs_day(m: re.Match[str], ref: date) -> TimeRange | None:
    try:
        return _day(date(int(m["year"]), MONTHS[m["month"].lower()], int(m["day"])))
    except ValueError:
        return None


def _abs_month(m: re.Match[str], ref: date) -> TimeRange | None:
    return _month(int(m["year"]), MONTHS[m["month"].lower()])


def _iso(m: re.Match[str], ref: date) -> TimeRange | None:
    try:
        return _day(date.fromisoformat(m.group(0)))
    except ValueError:
        return None


_RELATIVE: list[tuple[re.Pattern[str], Resolver]] = [
    (re.compile(r"\bthe day before yesterday\b", re.I), lambda m, r: _day(r - timedelta(days=2))),
    (re.compile(r"\bthe day after tomorrow\b", re.I), lambda m, r: _day(r + timedelta(days=2))),
    (re.compile(r"\b(?:yesterday|last night)\b", re.I), lambda m, r: _day(r - timedelta(days=1))),
    (re.compile(r"\btomorrow\b", re.I), lambda m, r: _day(r + timedelta(days=1))),
    (
        re.compile(r"\b(?:today|tonight|this (?:morning|afternoon|evening))\b", re.I),
        lambda m, r: _day(r),
    ),
    (
        re.compile(rf"\b{_NUM_RE} {_UNIT_RE} ago\b", re.I),
        lambda m, r: _shift(r, m["unit"].lower(), -_count(m["num"])),
    ),
    (
        re.compile(rf"\bin {_NUM_RE} {_UNIT_RE}\b", re.I),
        lambda m, r: _shift(r, m["unit"].lower(), _count(m["num"])),
    ),
    (
        re.compile(r"\b(?P<which>last|this|next) (?P<unit>weekend|week|month|year)\b", re.I),
        lambda m, r: _relative_unit(r, m["which"].lower(), m["unit"].lower()),
    ),
    (
        re.compile(rf"\b(?P<which>last|this|next) {_WEEKDAY_RE}\b", re.I),
        lambda m, r: _weekday(r, m["which"].lower(), WEEKDAYS[m["weekday"].lower()]),
    ),
]

_ABSOLUTE: list[tuple[re.Pattern[str], Resolver]] = [
    (re.compile(r"\b\d{4}-\d{2}-\d{2}\b"), _iso),
    (
        re.compile(
            rf"\b(?P<day>\d{{1,2}})(?:st|nd|rd|th)? (?:of )?{_MONTH_RE},? (?P<year>\d{{4}})\b", re.I
        ),
        _abs_day,
    ),
    (
        re.compile(
            rf"\b{_MONTH_RE} (?P<day>\d{{1,2}})(?:st|nd|rd|th)?,? (?P<year>\d{{4}})\b", re.I
        ),
        _abs_day,
    ),
    (re.compile(rf"\b{_MONTH_RE},? (?P<year>\d{{4}})\b", re.I), _abs_month),
    (
        re.compile(r"\b(?:in|since|during|of) (?P<year>(?:19|20)\d{2})\b", re.I),
        lambda m, r: _year(int(m["year"])),
    ),
]


def find_mentions(text: str, reference: date) -> list[TimeMention]:
    """All non-overlapping time phrases, absolute ones first, in text order."""
    taken: list[tuple[int, int]] = []
    found: list[TimeMention] = []
    for patterns, relative in ((_ABSOLUTE, False), (_RELATIVE, True)):
        for pattern, resolve in patterns:
            for match in pattern.finditer(text):
                a, b = match.span()
                if any(a < y and x < b for x, y in taken):
                    continue
                try:
                    span = resolve(match, reference)
                except (OverflowError, ValueError):  # past year 1 or 9999
                    span = None
                if span is None:
                    continue
                taken.append((a, b))
                found.append(TimeMention(a, b, match.group(0), span, relative))
    return sorted(found, key=lambda m: m.start)


def anchor_text(text: str, reference: date) -> tuple[str, TimeRange | None]:
    """Rewrite relative phrases as absolute ones and return the first time the text names."""
    mentions = find_mentions(text, reference)
    if not mentions:
        return text, None
    out: list[str] = []
    cursor = 0
    for mention in mentions:
        before = text[cursor : mention.start]
        if mention.relative:
            words = describe(mention.span)
            # "on yesterday" would read "on on 7 May": drop the speaker's own preposition.
            before = re.sub(r"\b(?:on|in|during)\s+$", "", before, flags=re.I)
            # "from last Friday" is "from 5 May", not "from on 5 May"
            if re.search(r"\b(?:from|since|until|till|by|before|after|of|for)\s+$", before, re.I):
                words = re.sub(r"^(?:on|in) ", "", words)
            out.extend([before, words])
        else:
            out.extend([before, mention.phrase])
        cursor = mention.end
    out.append(text[cursor:])
    return "".join(out), mentions[0].span
