from datetime import date, datetime

import pytest

from common.models.memory import TimeRange
from common.text.timeanchor import (
    TimeParseError,
    anchor_text,
    describe,
    find_mentions,
    parse_session_time,
)

MONDAY = date(2023, 5, 8)
SATURDAY = date(2023, 5, 13)
SUNDAY = date(2023, 5, 14)


def span(start: date, end: date | None = None) -> TimeRange:
    return TimeRange(start=start, end=end or start)


def first_span(text: str, reference: date) -> TimeRange | None:
    return anchor_text(text, reference)[1]


@pytest.mark.parametrize(
    ("phrase", "expected"),
    [
        ("yesterday", span(date(2023, 5, 7))),
        ("last night", span(date(2023, 5, 7))),
        ("the day before yesterday", span(date(2023, 5, 6))),
        ("tomorrow", span(date(2023, 5, 9))),
        ("the day after tomorrow", span(date(2023, 5, 10))),
        ("today", span(MONDAY)),
        ("this morning", span(MONDAY)),
        ("last Friday", span(date(2023, 5, 5))),
        ("next Friday", span(date(2023, 5, 12))),
        ("this Friday", span(date(2023, 5, 12))),
        ("last Monday", span(date(2023, 5, 1))),
        ("next Monday", span(date(2023, 5, 15))),
        ("last week", span(date(2023, 5, 1), date(2023, 5, 7))),
        ("this week", span(date(2023, 5, 8), date(2023, 5, 14))),
        ("next week", span(date(2023, 5, 15), date(2023, 5, 21))),
        ("last weekend", span(date(2023, 5, 6), date(2023, 5, 7))),
        ("this weekend", span(date(2023, 5, 13), date(2023, 5, 14))),
        ("next weekend", span(date(2023, 5, 13), date(2023, 5, 14))),
        ("last month", span(date(2023, 4, 1), date(2023, 4, 30))),
        ("next month", span(date(2023, 6, 1), date(2023, 6, 30))),
        ("last year", span(date(2022, 1, 1), date(2022, 12, 31))),
        ("this year", span(date(2023, 1, 1), date(2023, 12, 31))),
        ("two weeks ago", span(date(2023, 4, 24))),
        ("3 days ago", span(date(2023, 5, 5))),
        ("a few days ago", span(date(2023, 5, 5))),
        ("a couple of days ago", span(date(2023, 5, 6))),
        ("a year ago", span(date(2022, 1, 1), date(2022, 12, 31))),
        ("in 3 days", span(date(2023, 5, 11))),
        ("in two months", span(date(2023, 7, 1), date(2023, 7, 31))),
    ],
)
def test_relative_phrases_from_a_monday(phrase: str, expected: TimeRange) -> None:
    assert first_span(f"We did it {phrase}.", MONDAY) == expected


@pytest.mark.parametrize(
    ("phrase", "expected"),
    [
        ("yesterday", span(date(2023, 5, 13))),
        ("last Friday", span(date(2023, 5, 12))),
        ("next Friday", span(date(2023, 5, 19))),
        ("last week", span(date(2023, 5, 1), date(2023, 5, 7))),
        ("next week", span(date(2023, 5, 15), date(2023, 5, 21))),
        ("last weekend", span(date(2023, 5, 6), date(2023, 5, 7))),
    ],
)
def test_relative_phrases_from_a_sunday(phrase: str, expected: TimeRange) -> None:
    assert first_span(phrase, SUNDAY) == expected


@pytest.mark.parametrize(
    ("phrase", "expected"),
    [
        ("last weekend", span(date(2023, 5, 6), date(2023, 5, 7))),
        ("this weekend", span(date(2023, 5, 13), date(2023, 5, 14))),
        ("next weekend", span(date(2023, 5, 20), date(2023, 5, 21))),
        ("last Saturday", span(date(2023, 5, 6))),
        ("next Saturday", span(date(2023, 5, 20))),
    ],
)
def test_relative_phrases_from_a_saturday(phrase: str, expected: TimeRange) -> None:
    assert first_span(phrase, SATURDAY) == expected


def test_this_weekend_on_a_sunday_is_the_current_weekend() -> None:
    assert first_span("this weekend", SUNDAY) == span(date(2023, 5, 13), date(2023, 5, 14))


def test_next_weekend_on_a_sunday_is_the_coming_weekend() -> None:
    assert first_span("next weekend", SUNDAY) == span(date(2023, 5, 20), date(2023, 5, 21))


def test_month_and_year_boundaries() -> None:
    december = span(date(2023, 12, 1), date(2023, 12, 31))
    assert first_span("last month", date(2024, 1, 10)) == december
    assert first_span("next month", date(2023, 12, 15)) == span(date(2024, 1, 1), date(2024, 1, 31))
    assert first_span("last month", date(2024, 3, 31)) == span(date(2024, 2, 1), date(2024, 2, 29))
    assert first_span("last week", date(2024, 1, 3)) == span(date(2023, 12, 25), date(2023, 12, 31))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("It happened on 7 May 2023.", span(date(2023, 5, 7))),
        ("It happened on the 7th of May, 2023.", span(date(2023, 5, 7))),
        ("It happened on May 7, 2023.", span(date(2023, 5, 7))),
        ("It happened on Dec. 25, 2022.", span(date(2022, 12, 25))),
        ("It happened in June 2023.", span(date(2023, 6, 1), date(2023, 6, 30))),
        ("It happened in Feb 2024.", span(date(2024, 2, 1), date(2024, 2, 29))),
        ("It happened in 2022.", span(date(2022, 1, 1), date(2022, 12, 31))),
        ("It happened on 2023-05-07.", span(date(2023, 5, 7))),
    ],
)
def test_absolute_dates_keep_their_wording(text: str, expected: TimeRange) -> None:
    assert anchor_text(text, MONDAY) == (text, expected)


def test_sept_abbreviation() -> None:
    assert first_span("I moved in Sept 2023.", MONDAY) == span(date(2023, 9, 1), date(2023, 9, 30))


def test_invalid_absolute_dates_are_ignored() -> None:
    assert anchor_text("ref 2023-02-30 here", MONDAY) == ("ref 2023-02-30 here", None)


@pytest.mark.parametrize(
    ("text", "reference", "rewritten"),
    [
        ("We adopted a puppy yesterday.", MONDAY, "We adopted a puppy on 7 May 2023."),
        ("I moved last week.", MONDAY, "I moved in the week of 1 May 2023."),
        ("We hiked last weekend.", MONDAY, "We hiked on the weekend of 6 May 2023."),
        ("I started a job last month.", date(2024, 1, 10), "I started a job in December 2023."),
        ("We move in two months.", MONDAY, "We move in July 2023."),
        ("I quit last year.", MONDAY, "I quit in 2022."),
        ("We met on last Friday.", MONDAY, "We met on 5 May 2023."),
        ("See you in next week.", MONDAY, "See you in the week of 15 May 2023."),
        ("A pic from last Friday.", MONDAY, "A pic from 5 May 2023."),
        ("Busy since last week.", MONDAY, "Busy since the week of 1 May 2023."),
        ("Yesterday I ran, tomorrow I rest.", MONDAY, "on 7 May 2023 I ran, on 9 May 2023 I rest."),
    ],
)
def test_rewritten_text(text: str, reference: date, rewritten: str) -> None:
    assert anchor_text(text, reference)[0] == rewritten


def test_rewrite_leaves_unrelated_words_alone() -> None:
    text, _ = anchor_text("I checked in on the house yesterday.", MONDAY)
    assert text == "I checked in on the house on 7 May 2023."


def test_text_without_time_is_unchanged() -> None:
    text = "I love pottery and hiking with my friends on weekends."
    assert anchor_text(text, MONDAY) == (text, None)
    assert find_mentions(text, MONDAY) == []


def test_first_mention_is_returned_and_absolute_kept() -> None:
    text, first = anchor_text("I graduated in June 2023 and moved yesterday.", MONDAY)
    assert text == "I graduated in June 2023 and moved on 7 May 2023."
    assert first == span(date(2023, 6, 1), date(2023, 6, 30))


def test_find_mentions_in_text_order() -> None:
    text = "Yesterday I ran, and on 2023-05-01 I rested; the day before yesterday I slept."
    mentions = find_mentions(text, MONDAY)
    assert [(m.phrase, m.relative, m.span) for m in mentions] == [
        ("Yesterday", True, span(date(2023, 5, 7))),
        ("2023-05-01", False, span(date(2023, 5, 1))),
        ("the day before yesterday", True, span(date(2023, 5, 6))),
    ]
    assert all(text[m.start : m.end] == m.phrase for m in mentions)
    assert mentions[0].start == 0


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (span(date(2023, 5, 7)), "on 7 May 2023"),
        (span(date(2023, 6, 1), date(2023, 6, 30)), "in June 2023"),
        (span(date(2024, 2, 1), date(2024, 2, 29)), "in February 2024"),
        (span(date(2022, 1, 1), date(2022, 12, 31)), "in 2022"),
        (span(date(2023, 5, 6), date(2023, 5, 7)), "on the weekend of 6 May 2023"),
        (span(date(2023, 5, 1), date(2023, 5, 7)), "in the week of 1 May 2023"),
        (span(date(2023, 5, 2), date(2023, 5, 8)), "between 2 May 2023 and 8 May 2023"),
        (span(date(2023, 5, 7), date(2023, 5, 8)), "between 7 May 2023 and 8 May 2023"),
        (span(date(2023, 6, 1), date(2023, 6, 29)), "between 1 June 2023 and 29 June 2023"),
    ],
)
def test_describe(value: TimeRange, words: str) -> None:
    assert describe(value) == words


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("1:56 pm on 8 May, 2023", datetime(2023, 5, 8, 13, 56)),
        ("10:04 am on 20 January, 2024", datetime(2024, 1, 20, 10, 4)),
        ("2023-05-08T19:10:00", datetime(2023, 5, 8, 19, 10)),
        ("  2023-05-08  ", datetime(2023, 5, 8)),
    ],
)
def test_parse_session_time(value: str, expected: datetime) -> None:
    assert parse_session_time(value) == expected


@pytest.mark.parametrize("value", ["", "   ", "not a date"])
def test_parse_session_time_rejects(value: str) -> None:
    with pytest.raises(TimeParseError):
        parse_session_time(value)


@pytest.mark.parametrize(
    ("text", "reference"),
    [
        ("in 999 years", date(9999, 1, 1)),
        ("in 2 days", date(9999, 12, 31)),
        ("next year", date(9999, 6, 1)),
        ("next month", date(9999, 12, 5)),
        ("in 999 weeks", date(9990, 1, 1)),
        ("999 years ago", date(900, 1, 1)),
        ("yesterday", date(1, 1, 1)),
        ("last week", date(1, 1, 2)),
    ],
)
def test_a_time_past_the_calendar_resolves_to_nothing(text: str, reference: date) -> None:
    assert anchor_text(f"Tom moves {text}.", reference) == (f"Tom moves {text}.", None)
