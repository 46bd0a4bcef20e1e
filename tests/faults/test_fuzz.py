"""Property-based fuzz of the facade on every backend: hostile ids, texts, timestamps and
queries never break a promise.

The seam: one memory per backend (``open_memory`` from the contract suite, every engine in
``tests.services.PROVIDERS``); each generated case saves a one-event session carrying a
distinctive word (letters only, unique per case) and searches and counts in its own scope
and in a neighbour's. A model of what the store holds is kept beside it.

Promises checked, on every case:
- only ``LongTermMemoryError`` subclasses are raised (bad input is refused, not crashed on),
  and none by a search or count in a scope a save accepted, whatever the query;
- a save of valid input returns or refuses the input (``InvalidInputError``, e.g. over a
  size limit); one that returned lands whole: one new event with user text is one
  memory, found by its distinctive word in its own (app, user);
- a search or a count never shows a memory of another (app, user).
A save of invalid input that failed otherwise may or may not have written its record (the
ledger did not move; the next save retries): it may show up in its own scope, nowhere else.

Examples are derandomized (the same on every run) and few per backend, to stay fast.
"""

from __future__ import annotations

import itertools
import string
from collections import defaultdict
from collections.abc import Callable
from datetime import datetime
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from longterm import InvalidInputError, LongTermMemory, LongTermMemoryError, record_id

#: Pieces that break naive escaping: quotes, query operators of every engine's syntax,
#: separators, CJK, an emoji, right-to-left and zero-width marks...
PIECES = [
    *"\"'\\*?:@{}|()[]-~%$^/\n\t ",
    *("中文", "\U0001f600", "\u200b", "\u202e", "AND", "OR", "NOT", "NEAR", "*:*", "$where", '{"$ne": null}'),
    *("@user_id:{*}", "' OR 1=1 --", "a}|@user_id:{b"),
]
#: ...and what no id may hold: NUL and lone surrogates (text is repaired, ids refused).
INVALID = ["\x00", "\ud800", "\udfff", "\ud83d"]
ANY_CHAR = st.characters(codec=None, exclude_categories=())
VALID_CHAR = st.characters(codec="utf-8", exclude_characters=["\x00"])


def _texts(char: st.SearchStrategy[str], pieces: list[str]) -> st.SearchStrategy[str]:
    return st.lists(st.one_of(st.text(char, max_size=6), st.sampled_from(pieces)), max_size=10).map("".join)


TEXT = _texts(ANY_CHAR, PIECES + INVALID)
HUGE = st.builds(lambda piece, n: piece * n, st.text(ANY_CHAR, min_size=1, max_size=8), st.integers(500, 6000))
#: Ids a store must take: few, so scopes are shared and neighbours hold memories too.
VALID_IDS = st.one_of(
    st.sampled_from(["u", "v", "Alice", "中文用户", "a}|@user_id:{b", 'x" | "', "*", "default_app", "x" * 512]),
    _texts(VALID_CHAR, PIECES).filter(lambda s: s.strip() != "" and len(s) <= 512),
)
ANY_IDS = st.one_of(TEXT, HUGE, st.sampled_from(["", " ", "a\x00b", "x" * 513, "中" * 600, *INVALID]))
VALID_TIMESTAMPS = st.one_of(
    st.floats(0, 4e9),
    st.integers(0, 4_000_000_000_000),  # seconds or milliseconds
    st.datetimes(datetime(1970, 1, 1), datetime(2200, 1, 1)).map(lambda d: d.isoformat()),
    st.sampled_from(["2024-01-01T00:00:00Z", "2024-01-01", "9999-12-29T23:59:59+00:00", "1700000000", None, ""]),
)
ANY_TIMESTAMPS = st.one_of(
    st.floats(),
    st.integers(-(2**70), 2**70),
    st.datetimes().map(lambda d: d.isoformat()),
    st.sampled_from(["nan", "inf", "-inf", "1e400", "2024-02-30", "0001-01-01T00:00:00", "yesterday", True]),
    TEXT,
)
#: Which input of a case may be anything (else it is hostile but valid): mostly none, so
#: most cases save and are searched for.
LOOSE = [None] * 6 + ["app", "user", "session", "event", "timestamp"]


@st.composite
def cases(draw: st.DrawFn) -> dict[str, Any]:
    loose = draw(st.sampled_from(LOOSE))
    case: dict[str, Any] = {"loose": loose}
    case |= {k: draw(ANY_IDS if k == loose else VALID_IDS) for k in ("app", "user", "session", "event")}
    case["neighbour"] = draw(st.one_of(VALID_IDS, ANY_IDS))
    case["timestamp"] = draw(ANY_TIMESTAMPS if loose == "timestamp" else VALID_TIMESTAMPS)
    case["before"] = draw(st.one_of(TEXT, HUGE))
    case["after"] = draw(TEXT)
    case["word"] = draw(st.text(string.ascii_lowercase, min_size=4, max_size=8))
    case["query"] = draw(st.one_of(TEXT, st.sampled_from(PIECES + INVALID)))
    return case


def _letters(n: int) -> str:
    """``n`` as a word of letters (digits would split or join terms in some engines)."""
    out = ""
    while True:
        n, r = divmod(n, 26)
        out += string.ascii_lowercase[r]
        if n == 0:
            return out


def _record_id(*ids: str) -> str:
    """The id a record of these ids gets ("" where an id holds a lone surrogate: never stored)."""
    try:
        return record_id(*ids)
    except UnicodeError:
        return ""


def test_hostile_input_on_every_backend_raises_only_our_errors_and_never_crosses_scopes(
    open_memory: Callable[..., LongTermMemory], provider_id: str
):
    memory = open_memory()
    held: dict[tuple[str, str], set[str]] = defaultdict(set)  # saves that returned
    maybe: dict[tuple[str, str], set[str]] = defaultdict(set)  # saves that raised
    words: dict[str, str] = {}  # record id -> its distinctive word
    serial = itertools.count()

    def search(app: str, user: str, query: str, *, answers: bool = False) -> list[str]:
        """The ids found; ``answers``: the scope is known good, so the search must not raise."""
        try:
            found = memory.search_memory_sync(app_name=app, user_id=user, query=query, top_k=10)
        except LongTermMemoryError:
            if answers:
                raise
            return []
        ids = [m.id for m in found.memories]
        foreign = set(ids) - held[app, user] - maybe[app, user]
        assert not foreign, f"{provider_id}: a search in ({app!r}, {user!r}) for {query!r} returned others' memories"
        return ids

    @settings(
        max_examples=30,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
    )
    @given(case=cases())
    def check(case: dict[str, Any]) -> None:
        app, user, sid, eid = case["app"], case["user"], case["session"], case["event"]
        word = f"zq{case['word']}{_letters(next(serial))}"
        text = f"{case['before']} {word} {case['after']}"
        session = {
            "id": sid,
            "app_name": app,
            "user_id": user,
            "events": [
                {
                    "id": eid,
                    "author": "user",
                    "timestamp": case["timestamp"],
                    "content": {"role": "user", "parts": [{"text": text}]},
                }
            ],
        }
        rid = _record_id(app, user, sid, eid)
        try:
            result = memory.add_session_to_memory_sync(session)
        except InvalidInputError:
            result = None
        except LongTermMemoryError:
            if case["loose"] is None:  # valid input: refused as input, or saved
                raise
            result = None
            maybe[app, user].add(rid)
        if result is not None and result.new_events:
            assert (result.new_events, result.saved) == (1, 1), result
            held[app, user].add(rid)
            words[rid] = word
        if rid in words:  # saved now or before (a case replayed while shrinking fails the same way)
            found = search(app, user, words[rid], answers=True)
            assert rid in found, f"{provider_id}: the memory with {words[rid]!r} was saved but not found"
        search(app, user, case["query"], answers=result is not None)
        search(app, case["neighbour"], word)
        search(case["neighbour"], user, case["query"])
        if result is None:  # the scope may be one no store can hold
            return
        count = memory.count_sync(app_name=app, user_id=user)
        assert len(held[app, user]) <= count <= len(held[app, user] | maybe[app, user]), (
            f"{provider_id}: ({app!r}, {user!r}) counts {count}, holds {len(held[app, user])}"
        )

    check()
    assert len(words) >= 10, f"{provider_id}: only {len(words)} of the cases were saved; the fuzz proved little"
