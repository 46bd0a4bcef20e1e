"""A subprocess's output read line by line, each line within a deadline.

The seam: ``PipeLines(proc.stdout).next(seconds)``; used where a test reads a server's answers
(``tests/mcp``) or the line a server prints when it is up (``tests/ui``).
"""

from __future__ import annotations

import os
import selectors
import time
from typing import IO, Any


class PipeLines:
    """The lines a subprocess writes on a pipe, each waited for at most the seconds given.

    Reads the pipe's descriptor itself, never through the file object (which must not be read
    otherwise). Why: a buffered ``readline`` takes every line already in the pipe, so a
    ``select`` on the descriptor before the next ``readline`` waits for lines that sit in the
    buffer. Answers written together (a loaded machine delays the reader) then look like a
    server that stopped answering, when it had answered everything."""

    def __init__(self, pipe: IO[Any]) -> None:
        self.fd, self.held = pipe.fileno(), b""

    def next(self, seconds: float) -> str:
        """The next line with its newline ('' once the writer closed the pipe); ``TimeoutError``
        when no whole line arrives within ``seconds``."""
        deadline = time.monotonic() + seconds
        with selectors.DefaultSelector() as waiting:
            waiting.register(self.fd, selectors.EVENT_READ)
            while b"\n" not in self.held:
                if not waiting.select(timeout=max(0.0, deadline - time.monotonic())):
                    raise TimeoutError(f"no whole line within {seconds} s; holding {self.held[:200]!r}")
                chunk = os.read(self.fd, 1 << 16)
                if not chunk:
                    rest, self.held = self.held, b""
                    return rest.decode("utf-8")
                self.held += chunk
        line, _, self.held = self.held.partition(b"\n")
        return line.decode("utf-8") + "\n"
