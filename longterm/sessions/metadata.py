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
makes them (a datetime as ISO text, a dataclass as its fields, a set as a list, bytes as
base64) and checked as such; one with no JSON form but its ``str()`` (``object()``, a socket)
is refused, as is nesting deeper than engines read back (``MAX_DEPTH``), a dict holding
itself among them: both came back changed (a JSON string past level 32, ``"[cycle]"``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pydantic_core import to_jsonable_python

from ..trees import MAX_DEPTH

#: Metadata's integers stay within ± this: the integers every JSON reader and numeric index keep exactly.
MAX_SAFE_INT = 2**53 - 1


def metadata_problem(value: Any, path: str = "custom_metadata", depth: int = MAX_DEPTH) -> str | None:
    """What in ``value`` JSON cannot keep as given, naming where (``path`` and below); None: nothing.

    A key that is not a string, at any depth; NaN or an infinity; an integer beyond
    ``MAX_SAFE_INT``; a dict or list nested more than ``depth`` levels down (``value`` is
    level one; engines keep deeper ones as their JSON text), which is also where a structure
    that holds itself ends (records written as they are pass a deeper ``depth``: an earlier
    release kept up to some 255 levels); an object with no JSON form but its ``str()``. A loop, not
    recursion: metadata nests as deep as it was sent.
    """
    todo: list[tuple[Any, str, int]] = [(value, path, 1)]
    while todo:
        node, where, level = todo.pop()
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
            if level > depth:
                shown = where if len(where) <= 120 else f"{where[:100]}…"
                return (
                    f"{shown} nests deeper than {depth} levels (or holds itself): engines read back no "
                    "deeper; flatten it, or store the deep part as a JSON string."
                )
            if isinstance(node, Mapping):
                for key in node:
                    if not isinstance(key, str):
                        return (
                            f"{where} keys must be strings, got {key!r} ({type(key).__name__}): JSON keys are "
                            "text, so another key could take its place; use string keys."
                        )
            pairs = list(node.items()) if isinstance(node, Mapping) else list(enumerate(node))
            todo += [(v, f"{where}[{k!r}]", level + 1) for k, v in reversed(pairs)]  # the first problem in order
        elif not isinstance(node, (str, int, float)) and node is not None:
            try:  # a model, a dataclass, a datetime: checked as records.plain_tree stores it
                plain = to_jsonable_python(node, bytes_mode="base64")
            except (ValueError, TypeError):
                return (
                    f"{where} is a {type(node).__name__}, which has no JSON form; store text, a number, "
                    "true or false, None, a list or a dict."
                )
            except RecursionError:
                return f"{where} nests deeper than {depth} levels (or holds itself)."
            todo.append((plain, where, level))
    return None
