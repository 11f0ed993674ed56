import pytest

from common.text.keywords import (
    extract_keywords,
    name_tokens,
    normalize_keyword,
    normalize_keywords,
)


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        ("Pottery", "pottery"),
        ('"Pottery!"', "pottery"),
        ("(hiking),", "hiking"),
        ("Kids", "kid"),
        ("cats.", "cat"),
        ("hobbies", "hobby"),
        ("teaches", "teach"),
        ("dishes", "dish"),
        ("class", "class"),
        ("tennis", "tennis"),
        ("virus", "virus"),
        ("bus", "bus"),
        ("Anika's", "anika"),
        ("Anika\u2019s", "anika"),
        ("rock-climbing", "rock-climbing"),
    ],
)
def test_normalize_keyword(word: str, expected: str) -> None:
    assert normalize_keyword(word) == expected


@pytest.mark.parametrize(
    "word",
    ["the", "Really", "yesterday", "May", "october", "Friday", "2023", "ok", "it's", "", "!!"],
)
def test_words_without_topic_are_dropped(word: str) -> None:
    assert normalize_keyword(word) is None


@pytest.mark.parametrize(("word", "expected"), [("classes", "class"), ("boxes", "box")])
def test_es_plurals_match_their_singular(word: str, expected: str) -> None:
    assert normalize_keyword(word) == expected


def test_name_tokens_are_lower_cased_parts() -> None:
    assert name_tokens(["Priya Sharma", "Tom"]) == {"priya", "sharma", "tom"}


def test_normalize_keywords_splits_and_drops_names() -> None:
    words = ["Priya's kids love hobbies", "Sharma pottery"]
    assert normalize_keywords(words, names=["Priya Sharma"]) == ["kid", "hobby", "pottery"]


def test_possessive_name_is_excluded_case_insensitively() -> None:
    assert normalize_keywords(["PRIYA'S garden"], names=["priya"]) == ["garden"]
    assert normalize_keywords(["Priya\u2019s garden"], names=["Priya"]) == ["garden"]


def test_names_kept_when_not_listed() -> None:
    assert normalize_keywords(["Priya's garden"]) == ["priya", "garden"]


def test_duplicates_keep_first_seen_order() -> None:
    words = ["pottery class", "Hiking", "pottery", "kids", "kid", "KIDS hiking!"]
    assert normalize_keywords(words) == ["pottery", "class", "hiking", "kid"]


def test_digits_and_dates_do_not_become_keywords() -> None:
    assert normalize_keywords(["On 7 May 2023, Friday, I ran 5km"]) == ["ran"]


def test_extract_keywords_under_limit_keeps_all_in_order() -> None:
    assert extract_keywords("I adopted a beagle puppy yesterday", names=["Tom"]) == [
        "adopted",
        "beagle",
        "puppy",
    ]


def test_extract_keywords_limit_prefers_longest_then_earliest() -> None:
    text = "pottery bowl vase studio clay mug kiln"
    assert extract_keywords(text, limit=3) == ["pottery", "bowl", "studio"]
    assert extract_keywords(text, limit=1) == ["pottery"]
    assert extract_keywords(text, limit=0) == []


def test_extract_keywords_default_limit_is_five() -> None:
    text = "alpha bravo charlie delta echo foxtrot golf"
    assert extract_keywords(text) == ["alpha", "bravo", "charlie", "delta", "foxtrot"]


def test_extract_keywords_excludes_names() -> None:
    text = "Tom told Priya about Biscuit and the obedience course"
    expected = ["told", "biscuit", "obedience", "course"]
    assert extract_keywords(text, names=["Tom", "Priya"]) == expected
