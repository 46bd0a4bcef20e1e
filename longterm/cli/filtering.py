"""The CLI's filter options: ``--filter KEY=VALUE`` (repeatable) and ``--filter-json``, read into
the one filter syntax (``longterm.core.filters``).

The seam: ``filter_options`` decorates a command with both options; ``filters_of(pairs, text)``
turns what was typed into the ``filters=`` a facade call takes (None: no filter).

Why VALUE is read as JSON first: ``--filter n=3`` means the number 3 and ``--filter ok=true`` the
boolean, as in the filter's own JSON; anything that is not a JSON scalar is a string
(``--filter topic=travel``), and a quoted one stays a string (``--filter 'zip="02139"'``).
``NaN``, ``Infinity`` and ``-Infinity`` are strings too: Python's ``json`` reads them as numbers,
JSON does not, and a filter takes finite numbers only (``1e999``, past a float's range, as well).
Several ``--filter`` are all required, and with ``--filter-json`` too.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click

from ..errors import InvalidInputError
from .opening import json_object

F = TypeVar("F", bound=Callable[..., Any])


def filter_options(command: F) -> F:
    """``--filter`` and ``--filter-json`` on ``command`` (its parameters ``filter_pairs``, ``filter_json``)."""
    command = click.option(
        "--filter-json",
        "filter_json",
        default=None,
        help="A filter as JSON, or @file.json: {'topic': 'travel', 'n': {'$gt': 2}} (see docs/filters.md).",
    )(command)
    return click.option(
        "--filter",
        "filter_pairs",
        multiple=True,
        metavar="KEY=VALUE",
        help="Only memories whose KEY (a metadata key or path, session_id, author, role) equals VALUE "
        "(read as JSON when it is a number, true, false, null or a quoted string); repeatable, all required.",
    )(command)


def _value(text: str) -> Any:
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return text
    if isinstance(value, float) and not math.isfinite(value):
        return text  # NaN, Infinity (Python's json takes them; JSON has no such number) or 1e999
    return value if value is None or isinstance(value, (str, int, float, bool)) else text


def filters_of(pairs: Sequence[str], text: str | None) -> dict[str, Any] | None:
    """The filter typed as ``--filter`` pairs and ``--filter-json`` (None: neither)."""
    parts: list[dict[str, Any]] = []
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq or not key:
            raise InvalidInputError(f"--filter {pair!r}: write KEY=VALUE, e.g. --filter topic=travel.")
        parts.append({key: _value(value)})
    if text:
        parts.append(json_object("--filter-json", text))
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else {"$and": parts}
