"""Time expressions in questions become windows relative to the question's time."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from longterm.retrieval.when import window

# A Wednesday.
NOW = datetime(2023, 11, 15, 14, 30, tzinfo=timezone.utc)


def day(y: int, m: int, d: int) -> float:
    return datetime(y, m, d, tzinfo=timezone.utc).timestamp()


@pytest.mark.parametrize(
    ("query", "start", "end"),
    [
        ("What did Tim say about his injury on 16 November, 2023?", day(2023, 11, 16), day(2023, 11, 17)),
        ("What is Nate creating on November 9, 2022?", day(2022, 11, 9), day(2022, 11, 10)),
        ("Which book did Tim finish on 8th December, 2023?", day(2023, 12, 8), day(2023, 12, 9)),
        ("What did Nate share in November 2022?", day(2022, 11, 1), day(2022, 12, 1)),
        ("what did I tell you in May", day(2023, 5, 1), day(2023, 6, 1)),
        ("what did I say in December", day(2022, 12, 1), day(2023, 1, 1)),  # the latest December
        ("which career highs did John reach in 2023?", day(2023, 1, 1), day(2024, 1, 1)),
        ("Where was John between August 11 and August 15 2023?", day(2023, 8, 11), day(2023, 8, 16)),
        ("what did I say about work today", day(2023, 11, 15), day(2023, 11, 16)),
        ("what did we talk about yesterday", day(2023, 11, 14), day(2023, 11, 15)),
        ("what did I say last week", day(2023, 11, 6), day(2023, 11, 13)),
        ("anything I said this week?", day(2023, 11, 13), day(2023, 11, 20)),
        ("what did I buy last month", day(2023, 10, 1), day(2023, 11, 1)),
        ("where did I travel last year", day(2022, 1, 1), day(2023, 1, 1)),
        ("what did I do last Friday", day(2023, 11, 10), day(2023, 11, 11)),
        ("what did I do last weekend", day(2023, 11, 11), day(2023, 11, 13)),
        ("what did I eat two weeks ago", day(2023, 10, 28), day(2023, 11, 5)),
        ("我上个月买了什么", day(2023, 10, 1), day(2023, 11, 1)),
        ("我昨天说了什么", day(2023, 11, 14), day(2023, 11, 15)),
        ("我前天去哪儿了", day(2023, 11, 13), day(2023, 11, 14)),
        ("上周我跟你聊了什么", day(2023, 11, 6), day(2023, 11, 13)),
        ("我去年去了哪里旅行", day(2022, 1, 1), day(2023, 1, 1)),
        ("我2023年5月7日做了什么", day(2023, 5, 7), day(2023, 5, 8)),
        ("我五月份说过什么", day(2023, 5, 1), day(2023, 6, 1)),
        ("上周五我在干嘛", day(2023, 11, 10), day(2023, 11, 11)),
        ("我三天前提到的那本书", day(2023, 11, 11), day(2023, 11, 14)),
    ],
)
def test_a_time_expression_names_its_window(query: str, start: float, end: float) -> None:
    w = window(query, NOW)
    assert w is not None, query
    assert (w.start, w.end) == (start, end), (query, w)


@pytest.mark.parametrize(
    "query",
    [
        "What may I bring to the party?",  # a verb, not the month
        "what did I say about my trip",
        "what is my favourite number, 2023 or 42",
        "你上次推荐的那本书叫什么",
        "what did I say recently",  # names no window
        "三个月的课程是什么",  # a duration, not a time ago
    ],
)
def test_no_window_where_the_question_names_none(query: str) -> None:
    assert window(query, NOW) is None


def test_an_absolute_date_wins_over_a_relative_one() -> None:
    w = window("What was Tim's writing issue last week, as mentioned on November 6, 2023?", NOW)
    assert w is not None and (w.start, w.end) == (day(2023, 11, 6), day(2023, 11, 7))


def test_now_defaults_to_the_clock_and_takes_numbers() -> None:
    w = window("what did I say yesterday")
    assert w is not None and w.end <= datetime.now(timezone.utc).timestamp() + 1
    w2 = window("what did I say yesterday", NOW.timestamp())
    assert w2 is not None and w2.start == day(2023, 11, 14)
    assert window("what did I say yesterday", NOW.replace(tzinfo=None)) == w2


def test_a_window_holds_its_start_not_its_end() -> None:
    w = window("yesterday", NOW)
    assert w is not None and w.holds(day(2023, 11, 14)) and not w.holds(day(2023, 11, 15))
    assert w.holds(day(2023, 11, 15) - timedelta(seconds=1).total_seconds())


@pytest.mark.parametrize(
    "query",
    [
        "what did I say in Aprıl",
        "on 5 ſeptember",
        "ſep 3",
        "auguſt 2023",
        "what did I do laſt ſunday",
        "ſeven days ago",
    ],
)
def test_a_word_that_only_case_folding_makes_a_month_names_none(query: str) -> None:
    """Unicode ``re.I`` folds the dotless ı and the long ſ into i and s; such a word is no
    month's, weekday's or number's name and names no window (it raised KeyError out of every
    search asking it: months, then weekdays and numbers)."""
    assert window(query, NOW) is None
