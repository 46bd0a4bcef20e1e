"""Error classification: one table per engine, one wrapper for all of them.

The seam: an engine lists ``Rule``s (what a client library raises -> which of our errors,
and what the user should do); ``translate(exc, rules, ...)`` walks the exception and its
causes and returns the ``LongTermMemoryError`` to raise. Only our errors leave the core,
each with what failed, where, and what to do next; the original stays ``__cause__``.

Why a table: five engines wrapped errors five ways and drifted (13 copies of
``except LongTermMemoryError: raise``). A rule is data; the wrapper is written once.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from ..errors import (
    BackendError,
    BackendUnavailableError,
    InvalidInputError,
    LongTermMemoryError,
)

Matcher = type[BaseException] | tuple[type[BaseException], ...] | str | Callable[[BaseException], bool]


@dataclass(frozen=True)
class Rule:
    """``when`` an exception (a type, a tuple of types, a lower-case substring of its text, or
    a predicate) is seen, raise ``error`` with ``hint``. ``reopen``: the engine lost its
    schema (e.g. a server restarted empty): the core prepares it again and retries once."""

    when: Matcher
    error: type[LongTermMemoryError]
    hint: str = ""
    reopen: bool = False

    def matches(self, exc: BaseException) -> bool:
        w = self.when
        if isinstance(w, str):
            return w in str(exc).lower()
        if isinstance(w, (type, tuple)):
            return isinstance(exc, w)
        return bool(w(exc))


#: What every engine shares: a network that is down, and text no engine can encode.
TRANSPORT: tuple[type[BaseException], ...] = (
    ConnectionError,
    TimeoutError,
    asyncio.TimeoutError,
    socket.timeout,
    OSError,
)
COMMON: tuple[Rule, ...] = (
    Rule(
        UnicodeError,
        InvalidInputError,
        "The input holds text that is not valid Unicode. Text parts are repaired on the way in; "
        "repair other strings the same way, e.g. s.encode('utf-16', 'surrogatepass').decode('utf-16', 'replace').",
    ),
)


def chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and its causes (``__cause__``, else ``__context__``), at most 6 deep."""
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen and len(seen) < 6:
        seen.add(id(e))
        yield e
        e = e.__cause__ or e.__context__


def translate(
    exc: BaseException, rules: Sequence[Rule], *, engine: str, where: str, what: str, unreachable: str
) -> tuple[LongTermMemoryError, bool]:
    """Our error for ``exc`` raised while ``what`` on ``engine`` at ``where``, and whether
    the engine should be prepared again (see ``Rule.reopen``)."""
    if isinstance(exc, LongTermMemoryError):
        return exc, False
    causes = list(chain(exc))
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    text = text[:500]
    on = f"{engine} at {where}" if where else engine
    for rule in (*rules, *COMMON):
        if any(rule.matches(e) for e in causes):
            msg = f"{what} failed on {on}: {text}."
            return rule.error(f"{msg} {rule.hint}".strip()), rule.reopen
    if any(isinstance(e, TRANSPORT) for e in causes):
        return BackendUnavailableError(f"cannot reach {on} while {what}: {text}. {unreachable}".strip()), False
    return BackendError(f"{what} failed on {on}: {text}"), False


@contextmanager
def guard(
    what: str, engine: str, rules: Sequence[Rule] = (), *, where: str = "", unreachable: str = ""
) -> Iterator[None]:
    """Only our errors leave this block: anything else becomes the ``LongTermMemoryError``
    ``translate`` picks, chained to the original. Cancellation and interrupts pass through.

    The one translation outside the engine's runner (which translates with its rules and
    may reopen): the facade wraps what it asks of an engine in ``guard(what, name)``.
    Usable around ``await`` too (a plain ``with`` in async code)."""
    try:
        yield
    except LongTermMemoryError:
        raise
    except Exception as exc:  # BaseExceptions (CancelledError, KeyboardInterrupt) pass untouched
        error, _ = translate(exc, rules, engine=engine, where=where, what=what, unreachable=unreachable)
        raise error from exc
