"""Trees and text as the data model keeps them: valid Unicode, bounded depth, plain JSON values.

The seam: ``check_unicode``/``repair_unicode``/``repair_tree`` (text every engine can store),
``tree_text`` (a tree's words, for full text), ``bound_depth`` (a tree nested deeper than
``MAX_DEPTH`` kept as its JSON text), ``plain_tree`` (JSON-able values only). ``records``
re-exports them: they were its helpers before it grew past one job.

Why bounded: engines that store records as JSON read them back with parsers limited to a few
hundred levels, and a lone surrogate cannot be encoded as UTF-8 by any of them.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic_core import to_jsonable_python

from .errors import InvalidInputError

#: Deepest nesting kept of a tool call's arguments, a tool's response, a part's other fields
#: and metadata (levels of dicts and lists); a deeper subtree is kept as its JSON text. Engines
#: that store records as JSON read them back with parsers limited to a few hundred levels.
MAX_DEPTH = 32
#: Deepest nesting of a record's ``content`` and ``metadata``: ``MAX_DEPTH`` plus the envelope
#: (content, parts, part, field) around a tool call's arguments.
RECORD_DEPTH = MAX_DEPTH + 8
#: Longest JSON text a too-deep subtree becomes (characters); the rest is cut.
MAX_TREE_TEXT = 1_000_000


def is_valid_unicode(value: str) -> bool:
    """False when ``value`` holds a lone surrogate, which no engine can store (no UTF-8)."""
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_unicode(kind: str, value: str) -> str:
    """``value``, or an ``InvalidInputError`` naming ``kind`` when it holds a lone surrogate."""
    if not is_valid_unicode(value):
        raise InvalidInputError(f"{kind} {value!r} is not valid Unicode (it holds a lone UTF-16 surrogate).")
    return value


def repair_unicode(value: str) -> str:
    """``value`` with lone surrogates replaced by U+FFFD, and split pairs joined.

    They come from text cut in the middle of a UTF-16 pair (an emoji sliced by a client in
    JavaScript, say). Ids are refused instead (``_check_id``); text is repaired, because
    refusing it would keep the whole session from ever being saved over one character.
    """
    if is_valid_unicode(value):
        return value
    return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def repair_tree(value: Any) -> Any:
    """``repair_unicode`` through dicts and lists (keys too): tool arguments, metadata."""
    if isinstance(value, str):
        return repair_unicode(value)
    if isinstance(value, dict):
        return {repair_tree(k): repair_tree(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [repair_tree(v) for v in value]
    return value


def _leaf_text(value: Any) -> str:
    """One scalar (or any other object) as JSON text; never raises."""
    try:
        if isinstance(value, (str, int, float, bool)) or value is None:
            return json.dumps(value, ensure_ascii=False)
        return json.dumps(to_jsonable_python(value, fallback=str, bytes_mode="base64"), ensure_ascii=False, default=str)
    except (ValueError, TypeError, RecursionError):  # huge ints, objects nested too deep
        return json.dumps(f"<{type(value).__name__}>")


class _Raw(str):
    """Text ``tree_text`` writes as it is (punctuation, encoded keys), not as a JSON string."""


def tree_text(value: Any, limit: int = MAX_TREE_TEXT) -> str:
    """``value`` (dicts, lists, scalars) as JSON text, however deep; never raises.

    Written with an explicit stack, not recursion: ``json.dumps`` raises ``RecursionError``
    past ~1000 levels and pydantic's serializer ``ValueError`` past ~255. Text longer than
    ``limit`` characters (also what a cyclic structure gives) is cut and ends in "…".
    """
    out: list[str] = []
    size = 0
    stack: list[Any] = [value]  # values still to write, last first
    while stack:
        item = stack.pop()
        seq: list[Any]
        if isinstance(item, _Raw):
            piece = str(item)
        elif isinstance(item, dict):
            seq = [_Raw("{")]
            for i, (k, v) in enumerate(item.items()):
                key = k if isinstance(k, str) else _leaf_text(k).strip('"')
                seq += [_Raw(", " if i else ""), _Raw(json.dumps(key, ensure_ascii=False) + ": "), v]
            seq.append(_Raw("}"))
            stack.extend(reversed(seq))
            continue
        elif isinstance(item, (list, tuple)):
            seq = [_Raw("[")]
            for i, v in enumerate(item):
                seq += [_Raw(", "), v] if i else [v]
            seq.append(_Raw("]"))
            stack.extend(reversed(seq))
            continue
        else:
            piece = _leaf_text(item)
        out.append(piece)
        size += len(piece)
        if size > limit:
            return "".join(out)[:limit] + "…"
    return "".join(out)


def too_deep(value: Any, limit: int) -> bool:
    """True when a dict or list in ``value`` sits more than ``limit`` levels down (``value``
    itself is level one). A loop, not recursion: it runs for every record saved and read."""
    if not isinstance(value, (dict, list, tuple)):
        return False
    stack = [(value, 1)]
    while stack:
        node, level = stack.pop()
        if level > limit:
            return True
        for child in node.values() if isinstance(node, dict) else node:
            if isinstance(child, (dict, list, tuple)):
                stack.append((child, level + 1))
    return False


def bound(value: Any, limit: int, path: set[int] | None = None) -> Any:
    """``bound_depth``'s copy; ``path`` holds the containers above ``value``, so a structure
    that contains itself is cut where it does (as "[cycle]") instead of unrolled."""
    if not isinstance(value, (dict, list, tuple)):
        return value
    if limit <= 0:
        return tree_text(value)
    path = set() if path is None else path
    if id(value) in path:
        return "[cycle]"
    path.add(id(value))
    try:
        if isinstance(value, dict):
            return {k: bound(v, limit - 1, path) for k, v in value.items()}
        return [bound(v, limit - 1, path) for v in value]
    finally:
        path.discard(id(value))


def bound_depth(value: Any, limit: int = MAX_DEPTH) -> Any:
    """``value`` with every dict or list nested more than ``limit`` levels down (``value``
    itself is level one) replaced by its JSON text (``tree_text``); never raises.

    The seam where untrusted structures (tool arguments and responses, metadata) enter
    records: a record must read back on every engine, and JSON parsers stop at a few hundred
    levels (pydantic-core at 200). Returns ``value`` itself when nothing is too deep, so the
    common case costs one walk of the top levels and no copy.
    """
    if not too_deep(value, limit):
        return value
    return bound(value, limit)


def plain_tree(value: Any) -> Any:
    """Metadata as every engine stores it alike: bounded (``bound_depth``), plain JSON data
    (datetimes as ISO text, sets as lists, bytes as URL-safe base64, other objects as their text) and
    repaired Unicode. A ``datetime`` in metadata failed the save on one engine and passed on
    another; a lone surrogate in a field other than text kept a session from ever saving."""
    bounded = bound_depth(value)
    try:
        try:
            plain = to_jsonable_python(bounded, fallback=str, bytes_mode="base64")
        except UnicodeEncodeError:  # a key with a lone surrogate (keys are serialised): repaired first
            plain = to_jsonable_python(repair_tree(bounded), fallback=str, bytes_mode="base64")
        return repair_tree(bound_depth(plain))
    except (ValueError, TypeError, RecursionError):
        return repair_unicode(tree_text(value))
