"""The rule metadata is held to: JSON that every engine keeps as given, or refused naming where.

The seam: ``metadata_problem(value, path)`` says what in ``value`` JSON cannot keep as given,
naming where it is (``custom_metadata['a'][0]``), or None; ``MAX_SAFE_INT``. The gate applies
it wherever metadata enters: an event's own as the event is read (``read_events``: a lenient
read leaves that event out, unmarked, like any event it cannot read), the API's arguments in
``memory.inputs`` (``add``, ``add_events_to_memory``, ``add_memory``, the MCP server's save, and
records written as they are). Reads never apply it: what a store holds is read as it is.

Why refuse and not convert: every engine stores metadata as JSON, and what JSON has no form for
changed without a word, differently on each: NaN and infinities came back as None from Redis
and Qdrant and as given from SQLite; ``{"a": {1: "int one", "1": "str one"}}`` came back as
``{"a": {"1": "str one"}}``. Integers beyond 2**53 - 1 were kept, but a JSON reader in
JavaScript (an MCP client) and an engine's numeric index (a double, where filters compare)
keep no larger one exactly. Objects other than JSON's are stored as ``records.plain_tree``
makes them (a datetime as ISO text, a dataclass as its fields) and checked as such.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pydantic_core import to_jsonable_python

#: Metadata's integers stay within ± this: the integers every JSON reader and numeric index keep exactly.
MAX_SAFE_INT = 2**53 - 1


def metadata_problem(value: Any, path: str = "custom_metadata") -> str | None:
    """What in ``value`` JSON cannot keep as given, naming where (``path`` and below); None: nothing.

    A key that is not a string, at any depth; NaN or an infinity; an integer beyond
    ``MAX_SAFE_INT``. A loop, not recursion: metadata nests as deep as it was sent, and a
    structure that holds itself is walked once.
    """
    todo: list[tuple[Any, str]] = [(value, path)]
    seen: set[int] = set()
    while todo:
        node, where = todo.pop()
        if isinstance(node, float) and not math.isfinite(node):
            if math.isnan(node):
                return f"{where} is NaN: JSON has no NaN; store None or a string."
            sign = "-" if node < 0 else ""
            return f"{where} is {sign}infinity: JSON has no infinity; store None, a string or a finite number."
        if isinstance(node, int) and not isinstance(node, bool) and abs(node) > MAX_SAFE_INT:
            return (
                f"{where} is {node}, beyond ±(2**53 - 1), the integers every JSON reader keeps exactly; "
                "store it as a string."
            )
        if isinstance(node, (Mapping, list, tuple, set, frozenset)):
            if id(node) in seen:
                continue
            seen.add(id(node))
            if isinstance(node, Mapping):
                for key in node:
                    if not isinstance(key, str):
                        return (
                            f"{where} keys must be strings, got {key!r} ({type(key).__name__}): JSON keys are "
                            "text, so another key could take its place; use string keys."
                        )
            pairs = list(node.items()) if isinstance(node, Mapping) else list(enumerate(node))
            todo += [(v, f"{where}[{k!r}]") for k, v in reversed(pairs)]  # the first problem in order
        elif not isinstance(node, (str, int, float)) and node is not None:
            try:  # a model, a dataclass, a datetime: checked as records.plain_tree stores it
                todo.append((to_jsonable_python(node, fallback=str, bytes_mode="base64"), where))
            except (ValueError, TypeError, RecursionError):
                continue  # too deep to convert: plain_tree stores it as its JSON text
    return None
