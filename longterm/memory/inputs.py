"""The facade's argument checks: each wrong argument an ``InvalidInputError`` that names it.

The seam: ``scope(app_name, user_id)``, ``items(name, value, what)``, ``metadata(value)`` (and
``records_metadata(records)``, the same rule for ``upsert_records``),
``top_k(value)``, ``min_score(value)``, ``kind(value)``, ``text_id(name, value)``,
``as_of(value)``, ``context(value)`` and ``now(value)``, called first by every facade method,
before anything reaches an engine.

Why here, once: a caller's mistake (a string where a list goes, ``True`` as ``top_k``) would
otherwise be walked item by item, coerced, or fail deep in an engine with a message about
the engine; checked at the door it fails at once, the same way on every backend.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from ..core.filters import Any_, Cond
from ..core.where import Where, compiled, where_of
from ..errors import InvalidInputError, first_problem
from ..facts import KINDS, SearchKind
from ..facts.model import FACTS_SESSION
from ..facts.model import META as FACT_META
from ..records import MemoryRecord, Scope, check_id
from ..sessions import parse_timestamp
from ..sessions.metadata import metadata_problem

#: ``top_k`` (and ``limit``) accepted by search and listing (a guard against accidental full scans).
MAX_TOP_K = 1000


def scope(app_name: Any, user_id: Any) -> Scope:
    """The checked scope of (app_name, user_id); each field named: "app_name must be a string, got NoneType."."""
    check_id("app_name", app_name)
    check_id("user_id", user_id)
    try:
        return Scope(app_name=app_name, user_id=user_id)
    except ValidationError as exc:
        field, msg = first_problem(exc, "scope")
        raise InvalidInputError(msg if msg.startswith(field) else f"{field}: {msg}") from None


def items(name: str, value: Any, what: str) -> list[Any]:
    """``value`` as a list, or an ``InvalidInputError`` naming the argument: a string, a mapping or
    one model would otherwise be walked item by item and save nothing, or something else."""
    if isinstance(value, (str, bytes, Mapping, BaseModel)) or not isinstance(value, Iterable):
        raise InvalidInputError(f"{name} must be a list of {what}, got {type(value).__name__}.")
    return list(value)


def metadata(value: Any, name: str = "custom_metadata") -> Mapping[str, object] | None:
    """``custom_metadata`` (``name``) checked: None, or a mapping that JSON keeps as given, for it
    is stored as JSON on every engine (``sessions.metadata``: string keys at every depth,
    no NaN or infinity, integers within ±(2**53 - 1)); what JSON cannot keep is refused, naming
    where it is, never changed on some engines and not on others."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise InvalidInputError(f"{name} must be a dict with string keys (or None), got {type(value).__name__}.")
    if problem := metadata_problem(value, name):
        raise InvalidInputError(problem)
    if FACT_META in value:  # a memory would pass for a fact (and a malformed one broke every search)
        raise InvalidInputError(
            f"custom_metadata key {FACT_META!r} is reserved: it marks the library's fact records; use another name."
        )
    return value


#: How deep a record written as it is may nest its metadata: an earlier release kept up to ~255 levels.
RECORD_DEPTH_WRITTEN = 1_000


def records_metadata(records: list[Any]) -> list[Any]:
    """``records`` (``upsert_records``: a migration, an import of an export) with each record's
    metadata held to the rule a save's is (``metadata``), naming the record: a record written as
    it is must read back as it is on the engine it goes to. Records read from a store pass (their
    metadata was JSON there) but for one a local store kept with NaN before the rule: refused, not
    turned into None on the way (the local store still reads it as it is)."""
    for i, rec in enumerate(records):
        if not isinstance(rec, MemoryRecord):
            continue
        if problem := metadata_problem(rec.metadata, f"records[{i}].metadata", depth=RECORD_DEPTH_WRITTEN):
            raise InvalidInputError(f"{problem} (record {rec.id!r})")
    return records


def bounded_int(name: str, value: Any) -> int:
    """``value`` if it is an integer from 1 to ``MAX_TOP_K`` (strict: True or "5" are mistakes)."""
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_TOP_K:
        raise InvalidInputError(f"{name} must be an integer from 1 to {MAX_TOP_K}, got {value!r}.")
    return value


def min_score(value: Any) -> float | None:
    """``min_score``: None or a number from 0 to 1."""
    if value is not None and (
        isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0
    ):
        raise InvalidInputError(f"min_score must be a number from 0 to 1, got {value!r}.")
    return value


def kind(value: Any) -> SearchKind:
    """``kind`` of a search: one of ``KINDS``."""
    if value not in KINDS:
        raise InvalidInputError(f"kind must be one of {', '.join(KINDS)}, got {value!r}.")
    result: SearchKind = value
    return result


def text_id(name: str, value: Any) -> str:
    """``value`` if it is a string (a memory or fact id: any string may name one, or none)."""
    if not isinstance(value, str):
        raise InvalidInputError(f"{name} must be a string, got {type(value).__name__}.")
    return value


def as_of(value: Any) -> float:
    """``list_facts(as_of=)`` in seconds: read like an event's time, with errors naming it."""
    if value == "":
        raise InvalidInputError("as_of is empty; pass seconds since the epoch, a datetime or an ISO 8601 string.")
    try:
        return parse_timestamp(value)
    except InvalidInputError as exc:
        raise InvalidInputError(f"as_of: {exc}") from None


#: Neighbouring turns a search may return on each side of a hit (``context=``).
MAX_CONTEXT = 20


def context(value: Any) -> int:
    """``context`` of a search: how many turns before and after each hit, 0 to ``MAX_CONTEXT``."""
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_CONTEXT:
        raise InvalidInputError(f"context must be an integer from 0 to {MAX_CONTEXT}, got {value!r}.")
    return value


def filters(value: Any, *, facts_pass: bool = False) -> Where | None:
    """``filters=`` read once (``core.where``; None: no filter); a malformed one is refused by name.
    ``facts_pass``: the fact layer's records pass whatever the filter says (a search's facts are
    not filtered by metadata: they hold none of the user's)."""
    where = where_of(value)
    if where is None or where.filter is None or not facts_pass:
        return where
    facts = Cond("session_id", ("session_id",), "$eq", FACTS_SESSION)
    return compiled(Any_((facts, where.filter)))


def now(value: Any) -> float | None:
    """``now`` of a search (the question's time, for "last week"): None (the clock), or a time read
    like an event's (seconds, a datetime, an ISO 8601 string)."""
    if value is None:
        return None
    try:
        return parse_timestamp(value)
    except InvalidInputError as exc:
        raise InvalidInputError(f"now: {exc}") from None
