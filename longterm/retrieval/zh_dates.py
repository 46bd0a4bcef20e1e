"""Chinese dates written one way: 五月三号, 5月3日 and 5月3号 all become ``5月 3日``.

The seam: ``canonical_dates(text)`` rewrites month and day expressions (Chinese or Arabic
numerals, 日 or 号) to Arabic numbers with 月/日, and 星期三/礼拜三 to 周三, so
``text.py`` indexes and looks up one form whichever way a memory or a question wrote it.
Input is NFKC-normalised, case-folded and simplified already (号 not 號, 5 not ５).

Why rewrite instead of adding the other spelling: one form keeps a date to two terms
(``5月``, ``3日``) on both sides, so a question about 五月三号 finds 5月3日 and no
term is added to either side. Only numbers followed by 月, 日 or 号 are touched (and
day numbers up to 31, months up to 12), so 三个月 or 一下 stay as they are.
"""

from __future__ import annotations

import re

_DIGITS = {c: i for i, c in enumerate("〇一二三四五六七八九")} | {"零": 0, "两": 2}
_NUM = r"(?:[0-9]{1,2}|[〇零一二两三四五六七八九十]{1,3})"
_DATE = re.compile(rf"(?<![0-9])(?:(?:(?P<month>{_NUM})月份?)?(?P<day>{_NUM})[日号]|(?P<alone>{_NUM})月份?)")
_WEEKDAY = re.compile(r"(?:星期|礼拜)(?P<day>[一二三四五六日天])")


def _number(s: str) -> int | None:
    """``s`` (Arabic, or Chinese up to 99: 三, 十五, 二十一) as an int; None if it is not one."""
    if s.isdigit():
        return int(s)
    tens, ten, units = s.partition("十")
    if not ten:
        return _DIGITS[s] if len(s) == 1 else None
    if len(tens) > 1 or len(units) > 1 or "十" in units:
        return None
    return (_DIGITS[tens] if tens else 1) * 10 + (_DIGITS[units] if units else 0)


def _date(m: re.Match[str]) -> str:
    if m["alone"] is not None:
        month = _number(m["alone"])
        return f" {month}月 " if month and month <= 12 else m[0]
    day = _number(m["day"])
    month = _number(m["month"]) if m["month"] is not None else None
    if not day or day > 31 or (m["month"] is not None and not (month and month <= 12)):
        return m[0]
    return f" {month}月 {day}日 " if month else f" {day}日 "


def canonical_dates(text: str) -> str:
    """``text`` with its month/day expressions and weekdays in one canonical form."""
    text = _DATE.sub(_date, text)
    return _WEEKDAY.sub(lambda m: "周" + ("日" if m["day"] == "天" else m["day"]), text)
