"""Times as callers write them, read one way on every Python: the input gate's clock.

The seam: ``parse_timestamp(value) -> float``, seconds since the epoch (UTC), for every
event's ``timestamp`` (and the facade's ``as_of``); what is no time is an
``InvalidInputError`` naming the value.

Why our own ISO 8601 reader: ``datetime.fromisoformat`` accepts different forms on Python
3.10 and 3.11+, and one odd timestamp would otherwise fail a whole session on one Python only.
"""

from __future__ import annotations

import math
import re
from datetime import date, datetime, time

from ..errors import InvalidInputError
from ..records import MAX_TIMESTAMP, MIN_TIMESTAMP

_EPOCH = date(1970, 1, 1)

#: ISO 8601 as people write it: a calendar or week date in basic (``20240501``) or extended
#: (``2024-05-01``) format, then optionally ``T`` (or a space) and a time ``hh[:mm[:ss[.f]]]``
#: (or ``hhmmss``) with a fraction of any length and an offset ``Z``, ``+hh``, ``+hhmm`` or
#: ``+hh:mm``. Date and time may each be basic or extended; a time without an offset is UTC.
_ISO_8601 = re.compile(
    r"""(?P<year>\d{4})
    (?: (?P<ds>-?) (?P<month>\d\d) (?P=ds) (?P<day>\d\d)
      | (?P<ws>-?) W (?P<week>\d\d) (?: (?P=ws) (?P<weekday>\d) )? )
    (?: [T\x20] (?P<hour>\d\d)
        (?: (?P<ts>:?) (?P<minute>\d\d) (?: (?P=ts) (?P<second>\d\d) (?: [.,] (?P<fraction>\d+) )? )? )?
        (?: (?P<utc>Z) | (?P<sign>[+-]) (?P<oh>\d\d) (?: :? (?P<om>\d\d) )? )?
    )?""",
    re.VERBOSE | re.IGNORECASE | re.ASCII,
)


def _shown(value: float) -> str:
    """``value`` as an error message shows it: a huge integer by its size, not its 400 digits."""
    if isinstance(value, int) and value.bit_length() > 100:  # str() refuses past 4,300 digits
        return f"of about {int(value.bit_length() * 0.30103) + 1} digits"
    return repr(value)


def _in_range(seconds: float, shown: str) -> float:
    if not MIN_TIMESTAMP <= seconds <= MAX_TIMESTAMP:  # also False for NaN
        raise InvalidInputError(
            f"timestamp {shown} is not a time: give seconds (or milliseconds) since the epoch "
            "from 0001-01-02 to 9999-12-30 (UTC), or an ISO 8601 string."
        )
    return seconds


def _iso_seconds(text: str) -> float | None:
    """Seconds since the epoch of an ISO 8601 date or date-time; None if ``text`` is none."""
    m = _ISO_8601.fullmatch(text)
    if m is None:
        return None
    n = {k: int(v) for k, v in m.groupdict().items() if v and v.isdigit() and k != "fraction"}
    try:
        if "week" in n:
            day = date.fromisocalendar(n["year"], n["week"], n.get("weekday", 1))
        else:
            day = date(n["year"], n["month"], n["day"])
        clock = time(n.get("hour", 0), n.get("minute", 0), n.get("second", 0))
        if n.get("oh", 0) > 23 or n.get("om", 0) > 59:
            raise ValueError("offset out of range")
    except ValueError as exc:
        raise InvalidInputError(f"timestamp {text!r} is not a valid date or time ({exc}).") from None
    offset = (n.get("oh", 0) * 3600 + n.get("om", 0) * 60) * (-1 if m["sign"] == "-" else 1)
    fraction = float("0." + m["fraction"]) if m["fraction"] else 0.0
    seconds = (day - _EPOCH).days * 86400 + clock.hour * 3600 + clock.minute * 60 + clock.second
    return _in_range(seconds + fraction - offset, repr(text))


def parse_timestamp(value: object) -> float:
    """Seconds since the epoch (UTC) of an event's time; 0.0 when it has none.

    Accepts seconds or milliseconds (numbers above 1e11) as numbers or strings, aware
    ``datetime`` objects (a naive one is refused: Python reads it as local time, a store as
    UTC, and guessing either would move the memory), ``date`` objects (midnight UTC) and ISO
    8601 strings (see ``_ISO_8601``; one without an offset is UTC, as files and JSON write
    them), the same forms on every Python. Eight digits are a basic-format date, not seconds
    in 1970.
    """
    if value is None or value == "":
        return 0.0
    if isinstance(value, bool):
        raise InvalidInputError("timestamp must be a number or an ISO 8601 string, not a boolean.")
    if isinstance(value, (int, float)):
        try:
            seconds = float(value) / 1000.0 if value > 1e11 else float(value)  # accept milliseconds
        except OverflowError:  # an int past any float is past any time too
            seconds = math.inf
        return _in_range(seconds, _shown(value))
    if isinstance(value, datetime):
        offset = value.utcoffset()
        if offset is None:  # Python's own .timestamp() would read it as local time, we as UTC: neither guess
            raise InvalidInputError(
                f"the datetime {value.isoformat()} has no timezone; give an aware one "
                "(datetime.now(timezone.utc), or .replace(tzinfo=...)) or seconds since the epoch."
            )
        seconds = (value.replace(tzinfo=None) - datetime(1970, 1, 1)).total_seconds()
        return _in_range(seconds - offset.total_seconds(), value.isoformat())
    if isinstance(value, date):
        return _in_range((value - _EPOCH).days * 86400.0, value.isoformat())
    if isinstance(value, str):
        text = value.strip()
        iso = _iso_seconds(text)
        if iso is not None:
            return iso
        try:
            return parse_timestamp(float(text))
        except ValueError:
            raise InvalidInputError(
                f"timestamp {value!r} is neither a number of seconds nor an ISO 8601 string."
            ) from None
    raise InvalidInputError(f"timestamp must be a number or an ISO 8601 string, got {type(value).__name__}.")
