"""Moving a user: every memory, ledger entry and fact of (index A, scope S) into (index B, scope S').

The seam: ``await move(source, scope, target, to) -> Moved``, ``source`` and ``target`` the parts
(``Wiring``) of two indices of one store, or of the same one, and ``to`` the scope's NFC form (or
``scope`` itself). The records are read whole and written into the target, each with its id, or
with the id its NFC app, user and session derive (``saving.in_nfc``); facts follow the records
they point at (``facts.model.relinked``). The ledger goes with them: every session's handled
events (session ids in NFC), the ids a correction or an expiry settled (``lifetimes.SETTLED``),
the fact layer's distilled events and erasure marks (``facts.erasure.rekeyed_marks``). Then the
source's records are erased. ``move(parts, scope, parts, scope)`` re-keys only the sessions of
``scope`` whose ids are not NFC, in place, and does nothing when there are none.

Why this order: a move is crash-safe by it. Records are written first (an upsert by id: written
twice, still one), the ledger second (marks of the same events), the source erased third, and
the caller writes its marker last. Killed anywhere, the next run finds what the source still
holds and does the same again: nothing is saved twice, nothing erased comes back, nothing is lost.

Why the whole ledger, erased events included: the ledger is what keeps an erased memory erased
when its live session is saved again, and what keeps a replay from saving twice; a user moved
without it would get both back. A ledger that cannot list a user's sessions makes the move
refuse (``ConfigurationError``), never half done.

A scope whose ids are not NFC is erased by its records' ids, never as a whole: an engine's erase of
a whole scope may address it by its NFC form (an erase mark's scope), which is the twin's.

Where both hold a record of one id (an event saved into both indices, or an NFC twin), one
stays: the target's, unless the source's was corrected (``update``) later.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..core.errors import guard
from ..core.ledger import store_ledger
from ..errors import ConfigurationError
from ..facts.model import distilled_session, relinked
from ..records import MemoryRecord, Scope, record_id
from .lifetimes import SETTLED
from .saving import in_nfc
from .wiring import Wiring

#: Records written per upsert while moving.
BATCH = 500


@dataclass
class Moved:
    """What one move did."""

    records: int = 0
    """Records moved into the target (in place: re-keyed or relinked)."""
    sessions: int = 0
    """Ledger sessions written into the target."""

    def __bool__(self) -> bool:
        return bool(self.records or self.sessions)


def nfc(value: str) -> str:
    return unicodedata.normalize("NFC", value)


def _ours(sid: str) -> bool:
    """Whether ``sid`` is one of the library's own ledger sessions (a NUL-led id no caller can send)."""
    return sid.startswith("\x00")


async def ledger_sessions(parts: Wiring, scope: Scope) -> list[str] | None:
    """The ledger sessions of ``scope`` in ``parts``' index (None: its ledger cannot list them)."""
    listing = store_ledger(parts.ledger)
    if listing is None:
        return None
    with guard("reading the ledger", f"backend {parts.name!r}"):
        return await listing.sessions(scope)


async def read_ledger(parts: Wiring, scope: Scope, listed: Sequence[str]) -> dict[str, set[str]]:
    """Every non-empty ledger session of ``scope``: those ``listed``, and the library's own (the
    settled ids, the erasure marks, each session's distilled events) whether listed or not."""
    from ..facts.erasure import ERASURES  # the fact layer's rooms load only when used (``facts.layer``)

    names = {*listed, SETTLED, ERASURES, *(distilled_session(s) for s in listed if not _ours(s))}
    out = {}
    with guard("reading the ledger", f"backend {parts.name!r}"):
        for sid in sorted(names):
            if handled := await parts.ledger.saved(scope, sid):
                out[sid] = handled
    return out


def new_ids(scope: Scope, to: Scope, records: Sequence[MemoryRecord], ledger: Mapping[str, set[str]]) -> dict[str, str]:
    """Old record id -> new, for the records read and every event the ledger holds (erased or swept
    ones too: the settled ids and erasure marks may name them)."""
    ids = {}
    for sid, events in ledger.items():
        if not _ours(sid):
            for e in events:
                ids[record_id(scope.app_name, scope.user_id, sid, e)] = record_id(to.app_name, to.user_id, nfc(sid), e)
    ids.update((r.id, in_nfc(r).id) for r in records)
    return ids


def _later(mine: MemoryRecord, theirs: MemoryRecord) -> bool:
    """Whether ``mine`` was corrected after ``theirs`` (the one of the two ids that stays)."""
    return mine.updated_at is not None and (theirs.updated_at is None or mine.updated_at > theirs.updated_at)


async def move(source: Wiring, scope: Scope, target: Wiring, to: Scope) -> Moved:
    """Move ``scope`` of ``source`` into ``to`` of ``target`` (module docstring)."""
    here = source is target and scope == to
    listed = await ledger_sessions(source, scope)
    if listed is None:
        if here:  # nothing says a session is not NFC: nothing to re-key that can be known
            return Moved()
        raise ConfigurationError(
            f"cannot move a user out of backend {source.name!r}: its ledger cannot list a user's sessions, so the "
            "move would leave behind what keeps erased memories erased. Implement _ledger_sessions in the engine, "
            "or open the memory with index=... to use each index as it is."
        )
    if here and all(nfc(s) == s for s in listed):
        return Moved()
    ledger = await read_ledger(source, scope, listed)
    with guard("reading memories", f"backend {source.name!r}"):
        records = [r async for r in source.backend.scan(scope)]
    sessions = {sid: nfc(sid) for sid in ledger} | {r.session_id: nfc(r.session_id) for r in records}
    rekey = scope != to or any(old != new for old, new in sessions.items())
    ids = new_ids(scope, to, records, ledger) if rekey else {}
    moved = [relinked(in_nfc(r), ids, nfc) for r in records] if rekey else list(records)
    done = Moved(records=await _write(records, moved, target, to, here))
    with guard("writing the ledger", f"backend {target.name!r}"):
        for sid, handled in ledger.items():
            entries = _entries(sid, handled, ids, sessions) if rekey else handled
            if not (here and sessions[sid] == sid and entries == handled):
                await target.ledger.mark_saved(to, sessions[sid], sorted(entries))
                done.sessions += 1
    with guard("moving memories", f"backend {source.name!r}"):
        if here:
            for sid in sorted({r.session_id for r in records if sessions[r.session_id] != r.session_id}):
                await source.backend.delete(scope, session_id=sid)
        elif records:  # the whole scope when nothing came since the read (module docstring)
            whole = scope == in_nfc_scope(scope) and await source.backend.count(scope) <= len(records)
            await source.backend.delete(scope, None if whole else [r.id for r in records])
    return done


def in_nfc_scope(scope: Scope) -> Scope:
    """``scope`` with its ids in NFC, as stored (``Scope.stored``)."""
    return Scope.stored(nfc(scope.app_name), nfc(scope.user_id))


def _entries(sid: str, handled: set[str], ids: Mapping[str, str], sessions: Mapping[str, str]) -> set[str]:
    """A ledger session's entries after a re-key: settled record ids and erasure marks follow their
    records' new ids; events keep theirs (an event id is not re-keyed)."""
    from ..facts.erasure import ERASURES, rekeyed_marks  # loaded only when used (``facts.layer``)

    if sid == SETTLED:
        return {ids.get(i, i) for i in handled}
    if sid == ERASURES:
        return rekeyed_marks(handled, ids, sessions)
    return handled


async def _write(
    records: Sequence[MemoryRecord], moved: Sequence[MemoryRecord], target: Wiring, to: Scope, here: bool
) -> int:
    """Write ``moved`` (``records`` re-keyed) into ``to`` of ``target``: where the target holds an id
    already, only a later correction of it (module docstring); in place, only what changed. How many
    records moved (or, in place, changed), whether written or left to the target's own."""
    pairs = [(old, new) for old, new in zip(records, moved, strict=True) if not (here and new == old)]
    fresh = {new.id for old, new in pairs if not (here and new.id == old.id)}
    with guard("moving memories", f"backend {target.name!r}"):
        have = {r.id: r async for r in target.backend.scan(to) if r.id in fresh} if fresh else {}
        writes = [new for _, new in pairs if new.id not in have or _later(new, have[new.id])]
        for i in range(0, len(writes), BATCH):
            await target.backend.upsert(writes[i : i + BATCH])
    return len(pairs)
