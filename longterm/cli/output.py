"""What the ``longterm`` command prints: results on stdout, one line per failure or warning on stderr.

The seam: ``console`` and ``err_console`` (rich), ``safe(text)`` for anything that came from
the user or the store, ``fail(message)`` (``error: ...`` and exit status 1),
``errors_as_one_line()`` (the policy every command runs under) and ``log_in_one_line()`` /
``muted(logger)`` for the library's own warnings.

Why every failure is one line: an operator reads ``error: <what failed, what to do>`` on
stderr and exit status 1, never a traceback. ``LongTermMemoryError`` and ``OSError`` say it
themselves; anything else is our bug and says ``internal error: ... (please report)``.
Click's own usage errors keep click's message and exit status. Values that come from the
user or the store (ids, memory text, paths) are printed as plain text, never as markup, and
with their control characters shown escaped.
"""

from __future__ import annotations

import errno
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NoReturn

import click
from rich.console import Console
from rich.markup import escape
from rich.text import Text
from typing_extensions import override

from ..errors import LongTermMemoryError

console = Console()
err_console = Console(stderr=True, soft_wrap=True, highlight=False)  # soft_wrap: one line, however long

#: Control characters (but tab and newline) shown escaped: stored text or an id holding ESC
#: sequences must not drive the terminal that prints it.
_CONTROLS = {c: f"\\x{c:02x}" for c in (*range(0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0))}


def safe(text: str) -> str:
    """``text`` fit for a terminal: control characters and lone surrogates shown escaped."""
    return text.translate(_CONTROLS).encode("utf-8", "backslashreplace").decode("utf-8")


def fail(message: str) -> NoReturn:
    """Print ``error: message`` as one line on stderr and exit 1.

    Exits through click (``click.exceptions.Exit``, an ordinary exception), so a failure
    inside ``asyncio.run`` leaves the loop as any error does."""
    err_console.print(Text.assemble(("error:", "bold red"), " ", safe(" ".join(message.split()))))
    raise click.exceptions.Exit(1)


def _os_error(exc: OSError) -> str:
    if exc.strerror and exc.filename is not None:
        return f"{exc.strerror}: {exc.filename}"
    return str(exc) or type(exc).__name__


@contextmanager
def errors_as_one_line() -> Iterator[None]:
    """Whatever the block raises leaves as one ``error:`` line (click's own exits as click says)."""
    try:
        yield
    except (click.ClickException, click.exceptions.Exit, click.Abort):
        raise  # click prints these itself
    except LongTermMemoryError as exc:
        fail(str(exc))
    except OSError as exc:
        if exc.errno == errno.EPIPE:
            raise  # output piped into `head`: click leaves quietly
        fail(_os_error(exc))
    except Exception as exc:
        fail(f"internal error: {type(exc).__name__}: {exc} (please report)")


def indices_phrase(indices: list[str]) -> str:
    """``index 'a'`` / ``indices 'a', 'b'``, escaped for rich markup and the terminal."""
    names = ", ".join(map(repr, indices))
    return escape(safe(f"index {names}" if len(indices) == 1 else f"indices {names}"))


class _OneLineLog(logging.Handler):
    """The library's warnings as the command prints them: ``warning: <message>``, one line on
    stderr, control characters escaped (Python's fallback printed the raw message, a path or
    an id holding ESC sequences included, and a logged exception's traceback)."""

    @override
    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
            if record.exc_info and record.exc_info[1] is not None:
                message += f" ({type(record.exc_info[1]).__name__}: {record.exc_info[1]})"
            level = "warning" if record.levelno < logging.ERROR else "error"
            err_console.print(Text.assemble((f"{level}:", "yellow"), " ", safe(" ".join(message.split()))))
        except Exception:
            self.handleError(record)


#: The command's one handler on the ``longterm`` loggers.
_HANDLER = _OneLineLog(logging.WARNING)


def log_in_one_line() -> None:
    """Route the ``longterm`` loggers' warnings through the command's one-line handler (once per process)."""
    root = logging.getLogger("longterm")
    if _HANDLER not in root.handlers:
        root.addHandler(_HANDLER)


@contextmanager
def muted(logger: str) -> Iterator[None]:
    """While inside, the command prints no warning of ``logger`` (and its children): the command
    says what went wrong itself, in its own line. Errors still print; the library's loggers and
    any other handler are left as they are."""

    def keep(record: logging.LogRecord) -> bool:
        mine = record.name == logger or record.name.startswith(logger + ".")
        return not mine or record.levelno >= logging.ERROR

    _HANDLER.addFilter(keep)
    try:
        yield
    finally:
        _HANDLER.removeFilter(keep)
