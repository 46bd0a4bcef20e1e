"""Time in questions: "what did I say last week", "in May 2023", "上个月", as a window of time.

The seam: ``window(query, now)`` returns the ``TimeWindow`` (start, end in epoch seconds)
a question's time expression names, relative to ``now`` (the question's time), or None
when it names none. The searcher ranks the hits inside the window first (see
``searching``); nothing else reads this module.

Why a window and not words: "last week" is in no memory's text, and "May" matches the
month's name, not the memories made in May. Why so few forms: a wrong window reorders
every hit, so only unambiguous expressions count (an absolute date, a named relative
period, "N days ago"); "recently", "before my trip" name no window and are left to the
words. An absolute date wins over a relative one in the same question ("last week, as
mentioned on 6 November 2023": the date). Calendar periods are read in ``now``'s
timezone (UTC when ``now`` is naive or a number).
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_MONTHS |= {name.lower(): i for i, name in enumerate(calendar.month_abbr) if name}
_MONTHS["sept"] = 9
_MONTH = "|".join(sorted(_MONTHS, key=len, reverse=True))
_ORD = r"(?:st|nd|rd|th)?"
_YEAR = r"(?:19|20)\d\d"
_WEEKDAYS = {name.lower(): i for i, name in enumerate(calendar.day_name)}
_ZH_WEEKDAYS = {c: i for i, c in enumerate("一二三四五六日")} | {"天": 6}
_ZH_DIGITS = {c: i for i, c in enumerate("零一二三四五六七八九")} | {"两": 2, "〇": 0}
_WORD_NUMBERS = {
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
    "a couple of": 2,
    "couple of": 2,
    "a few": 3,
    "few": 3,
}

_EN_DAY_MONTH = re.compile(
    rf"\b(?P<day>\d{{1,2}}){_ORD}\s+(?:of\s+)?(?P<month>{_MONTH})\.?(?:,?\s*(?P<year>{_YEAR}))?\b", re.I
)
_EN_MONTH_DAY = re.compile(
    rf"\b(?P<month>{_MONTH})\.?\s+(?P<day>\d{{1,2}}){_ORD}(?!\d)(?:,?\s*(?P<year>{_YEAR}))?\b(?!\s*:)", re.I
)
_EN_MONTH_YEAR = re.compile(rf"\b(?P<month>{_MONTH})\.?,?\s+(?P<year>{_YEAR})\b", re.I)
_EN_MONTH = re.compile(rf"\b(?:in|during|since|of|this|last)\s+(?P<month>{_MONTH})\b(?!\s*\d)", re.I)
_EN_YEAR = re.compile(rf"\b(?:in|during|of|since)\s+(?P<year>{_YEAR})\b", re.I)
_ZH_DATE = re.compile(
    r"(?:(?P<year>(?:19|20)\d\d)\s*年)?\s*(?P<month>\d{1,2}|[一二三四五六七八九十]{1,2})\s*月(?:份)?\s*(?:(?P<day>\d{1,2}|[一二三四五六七八九十]{1,3})\s*[日号])?"
)
_ZH_YEAR = re.compile(r"(?P<year>(?:19|20)\d\d)\s*年(?!\s*(?:\d|[一二三四五六七八九十])+\s*月)")

_N = r"(?P<n>\d+|a couple of|couple of|a few|few|an?|one|two|three|four|five|six|seven|eight|nine|ten)"
_EN_AGO = re.compile(rf"\b{_N}\s+(?P<unit>day|week|month|year)s?\s+ago\b", re.I)
_EN_LAST_WEEKDAY = re.compile(r"\blast\s+(?P<wd>monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b", re.I)
_EN_PERIOD = re.compile(
    r"\b(?P<which>this|last|past|previous)\s+(?P<unit>week(?:end)?|month|year)\b|"
    r"\b(?P<day>today|tonight|this morning|this afternoon|this evening|yesterday|the day before yesterday)\b",
    re.I,
)
_ZH_NUM = r"(?P<n>\d+|[一二两三四五六七八九十几]{1,3})"
_ZH_AGO = re.compile(rf"{_ZH_NUM}\s*(?P<unit>天|日|周|个星期|个礼拜|星期|礼拜|个月|月|年)(?:以)?前")
_ZH_LAST_WEEKDAY = re.compile(r"(?:上|上个)(?:周|星期|礼拜)(?P<wd>[一二三四五六日天])")
_ZH_PERIOD = re.compile(
    r"(?P<day>大前天|前天|昨天|昨日|昨晚|今天|今日|今晚|今早|今天早上)|"
    r"(?P<week>这周|本周|这个星期|这星期|这个礼拜|这礼拜|上周末|这周末|上周|上个星期|上星期|上个礼拜|上礼拜)|"
    r"(?P<month>这个月|本月|上个月|上月)|(?P<year>今年|去年|前年)"
)


@dataclass(frozen=True)
class TimeWindow:
    """[start, end) in epoch seconds, and the words of the question that named it."""

    start: float
    end: float
    said: str

    def holds(self, timestamp: float) -> bool:
        return self.start <= timestamp < self.end


def _zh_number(s: str) -> int | None:
    if s.isdigit():
        return int(s)
    if s == "几":
        return 3
    tens, ten, units = s.partition("十")
    if not ten:
        return _ZH_DIGITS.get(s) if len(s) == 1 else None
    high = _ZH_DIGITS.get(tens, 0) if tens else 1
    low = _ZH_DIGITS.get(units, 0) if units else 0
    return high * 10 + low


def _at(now: datetime, year: int, month: int, day: int = 1) -> datetime:
    return now.replace(year=year, month=month, day=day, hour=0, minute=0, second=0, microsecond=0)


def _month_window(now: datetime, month: int, year: int | None) -> tuple[datetime, datetime] | None:
    if not 1 <= month <= 12:
        return None
    if year is None:  # the latest such month that has begun
        year = now.year if month <= now.month else now.year - 1
    start = _at(now, year, month)
    end = _at(now, year + 1, 1) if month == 12 else _at(now, year, month + 1)
    return start, end


def _day_window(now: datetime, month: int, day: int, year: int | None) -> tuple[datetime, datetime] | None:
    if not 1 <= month <= 12:
        return None
    y = year if year is not None else now.year
    if not 1 <= day <= calendar.monthrange(y, month)[1]:
        return None
    start = _at(now, y, month, day)
    if year is None and start > now + timedelta(days=1):  # the latest such date
        if day > calendar.monthrange(y - 1, month)[1]:
            return None
        start = _at(now, y - 1, month, day)
    return start, start + timedelta(days=1)


def _month(m: re.Match[str]) -> int:
    """The number of the month ``m`` names; 0 for a word ``re.I`` matched only by folding a letter
    that is none of the name's (``Aprıl``'s dotless i, ``ſept``'s long s): it names no month."""
    return _MONTHS.get(m["month"].lower(), 0)


def _absolute(query: str, now: datetime) -> tuple[tuple[datetime, datetime], str] | None:
    found: list[tuple[tuple[datetime, datetime], str]] = []
    for pattern in (_EN_DAY_MONTH, _EN_MONTH_DAY):
        for m in pattern.finditer(query):
            year = int(m["year"]) if m["year"] else None
            w = _day_window(now, _month(m), int(m["day"]), year)
            if w:
                found.append((w, m[0]))
    if not found:
        for m in _EN_MONTH_YEAR.finditer(query):
            w = _month_window(now, _month(m), int(m["year"]))
            if w:
                found.append((w, m[0]))
    if not found:
        for m in _ZH_DATE.finditer(query):
            month = _zh_number(m["month"])
            if month is None:
                continue
            year = int(m["year"]) if m["year"] else None
            day = _zh_number(m["day"]) if m["day"] else None
            w = _day_window(now, month, day, year) if day else _month_window(now, month, year)
            if w:
                found.append((w, m[0].strip()))
    if not found:
        for m in _EN_MONTH.finditer(query):
            month = _month(m)
            w = _month_window(now, month, None)
            if w and m[0].lower().startswith("last ") and w[1] > now:  # this one is still running
                w = _month_window(now, month, w[0].year - 1)
            if w:
                found.append((w, m[0]))
    if not found:
        for pattern in (_EN_YEAR, _ZH_YEAR):
            for m in pattern.finditer(query):
                year = int(m["year"])
                found.append(((_at(now, year, 1), _at(now, year + 1, 1)), m[0]))
    if not found:
        return None
    start = min(w[0] for w, _ in found)
    end = max(w[1] for w, _ in found)
    return (start, end), " / ".join(said for _, said in found)


def _week_start(day: datetime) -> datetime:
    return (day - timedelta(days=day.weekday())).replace(hour=0, minute=0, second=0, microsecond=0)


def _period(unit: str, which: str, now: datetime) -> tuple[datetime, datetime]:
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    if which == "past":  # the last N units up to now
        span = {"week": timedelta(days=7), "weekend": timedelta(days=7), "month": timedelta(days=31)}
        return now - span.get(unit, timedelta(days=366)), now + timedelta(seconds=1)
    if unit == "weekend":
        saturday = _week_start(today) + timedelta(days=5 if which == "this" else -2)
        return saturday, saturday + timedelta(days=2)
    if unit == "week":
        start = _week_start(today) - (timedelta(days=7) if which in {"last", "previous"} else timedelta())
        return start, start + timedelta(days=7)
    if unit == "month":
        start = today.replace(day=1)
        if which in {"last", "previous"}:
            start = (start - timedelta(days=1)).replace(day=1)
        nxt = (start + timedelta(days=32)).replace(day=1)
        return start, nxt
    year = now.year - (1 if which in {"last", "previous"} else 0)
    return _at(now, year, 1), _at(now, year + 1, 1)


def _ago(n: int, unit: str, now: datetime) -> tuple[datetime, datetime]:
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    if unit == "day":
        start = today - timedelta(days=n)
        return start - timedelta(days=1), start + timedelta(days=2)  # a day either side: "3 days ago" is loose
    if unit == "week":
        centre = today - timedelta(days=7 * n)
        return centre - timedelta(days=4), centre + timedelta(days=4)
    if unit == "month":
        centre = today - timedelta(days=30 * n)
        return centre - timedelta(days=16), centre + timedelta(days=16)
    centre = today - timedelta(days=365 * n)
    return centre - timedelta(days=183), centre + timedelta(days=183)


def _last_weekday(weekday: int, now: datetime) -> tuple[datetime, datetime]:
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    back = (today.weekday() - weekday) % 7 or 7
    start = today - timedelta(days=back)
    return start, start + timedelta(days=1)


def _relative(query: str, now: datetime) -> tuple[tuple[datetime, datetime], str] | None:
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    if (m := _EN_AGO.search(query)) and (n := int(m["n"]) if m["n"].isdigit() else _WORD_NUMBERS.get(m["n"].lower())):
        return _ago(n, m["unit"].lower(), now), m[0]  # (a number re.I matched by folding, "ſeven", names none)
    if m := _ZH_AGO.search(query):
        count = _zh_number(m["n"])
        unit = {"天": "day", "日": "day", "年": "year", "月": "month", "个月": "month"}.get(m["unit"], "week")
        if count:
            return _ago(count, unit, now), m[0]
    if (m := _EN_LAST_WEEKDAY.search(query)) and (wd := _WEEKDAYS.get(m["wd"].lower())) is not None:
        return _last_weekday(wd, now), m[0]  # (as for months: "ſunday" names no day)
    if m := _ZH_LAST_WEEKDAY.search(query):
        return _last_weekday(_ZH_WEEKDAYS[m["wd"]], now), m[0]
    if m := _EN_PERIOD.search(query):
        if m["day"]:
            back = {"yesterday": 1, "the day before yesterday": 2}.get(m["day"].lower(), 0)
            start = today - timedelta(days=back)
            return (start, start + timedelta(days=1)), m[0]
        return _period(m["unit"].lower(), m["which"].lower(), now), m[0]
    if m := _ZH_PERIOD.search(query):
        said = m[0]
        if m["day"]:
            back = {"大前天": 3, "前天": 2, "昨天": 1, "昨日": 1, "昨晚": 1}.get(said, 0)
            start = today - timedelta(days=back)
            return (start, start + timedelta(days=1)), said
        if m["week"]:
            unit = "weekend" if said.endswith("周末") else "week"
            return _period(unit, "this" if said[0] in "这本" else "last", now), said
        if m["month"]:
            return _period("month", "this" if said[0] in "这本" else "last", now), said
        back = {"今年": 0, "去年": 1, "前年": 2}[said]
        return (_at(now, now.year - back, 1), _at(now, now.year - back + 1, 1)), said
    return None


def window(query: str, now: datetime | float | None = None) -> TimeWindow | None:
    """The window of time ``query`` names relative to ``now`` (default: the clock), or None."""
    if now is None:
        now = datetime.now(timezone.utc)
    elif not isinstance(now, datetime):
        now = datetime.fromtimestamp(float(now), timezone.utc)
    elif now.tzinfo is None:
        now = now.replace(tzinfo=timezone.utc)
    text = query[:2000]  # a time expression is near the words of a question, not deep in a paste
    found = _absolute(text, now) or _relative(text, now)
    if found is None:
        return None
    (start, end), said = found
    return TimeWindow(start.timestamp(), end.timestamp(), said)
