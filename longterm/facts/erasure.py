"""Erasure marks, and what an erase does to facts: they follow their evidence.

The seam: ``Erasures(backend, ledger)``. Before evidence is deleted, ``begin(scope,
session_id=..., memory_id=...)`` adds a mark to the store's ledger (``ERASURES``) and returns
which records it erases; after, ``erase(scope)`` makes the user's facts agree with what is
left (``agree``). Work that writes facts reads the marks before it starts (``read``) and
calls ``after_write`` once it wrote; ``erased_since`` says which records an erase since some
marks took away, and ``settled`` notes the marks a user's facts were made to agree with.
``rekeyed_marks`` rewrites marks for records and sessions given new ids (a store re-keyed to NFC).

Why marks: work in flight elsewhere (another thread's batch, another process) is caught by
them. A batch, consolidation or rebuild reads the marks before it starts and after it wrote,
and makes the facts agree when a mark appeared (or one its facts never agreed with), so a
fact distilled from evidence erased meanwhile does not stay. A mark holds a digest of the
erased session or record id (``_key``) and a nonce, never the id itself.

Why facts follow their evidence (``agree``): a fact whose evidence is all gone goes, one that
loses some keeps the rest, and a fact that a gone fact or gone evidence had replaced or
retracted holds again. An erase runs it after the evidence is deleted, and never waits for a
model.
"""

from __future__ import annotations

import hashlib
import time
import uuid
from collections.abc import Callable, Collection, Mapping

from ..core.backend import Backend
from ..core.ledger import Ledger
from ..records import MemoryRecord, Scope
from ..retrieval.text import STOPWORDS, index_terms
from .model import FACTS_SESSION, Fact, is_fact, iso

#: Ledger session of erasure marks (a NUL-led id no caller can send; see ``model``).
ERASURES = f"{FACTS_SESSION}\x00\x00erasures"

#: Which records an erase took away.
Erased = Callable[[MemoryRecord], bool]


class Erasures:
    def __init__(self, backend: Backend, ledger: Ledger) -> None:
        self.backend = backend
        self.ledger = ledger
        self._marks: dict[Scope, set[str]] = {}
        """Per user, every mark this process has seen (read or added)."""
        self._agreed: dict[Scope, set[str]] = {}
        """Per user, the erasure marks its facts were last made to agree with (``agree``)."""
        self._erasing: dict[Scope, set[str]] = {}
        """Per user, the words of evidence this process is erasing (``begin`` to ``erase``);
        in memory only, never written."""

    async def read(self, scope: Scope) -> set[str]:
        """The user's erasure marks in the ledger now."""
        marks = await self.ledger.saved(scope, ERASURES)
        self._marks[scope] = self._marks.get(scope, set()) | marks
        return marks

    def known(self, scope: Scope) -> set[str]:
        """The user's marks this process has seen (read, or added by its erases), without a read."""
        return set(self._marks.get(scope, set()))

    def erased_since(self, scope: Scope, marks: set[str]) -> Erased:
        """A predicate: was the record erased by a mark not in ``marks``? (read from the marks
        the last ``read`` left: marks of this process are there at once)."""
        new = self._marks.get(scope, set()) - marks
        if any(m.startswith("u:") for m in new):
            return lambda r: True
        keys = {m.split(":")[1] for m in new}
        return lambda r: _key(r.session_id) in keys or _key(r.id) in keys

    def settled(self, scope: Scope, marks: set[str]) -> None:
        """The user's facts now agree with the evidence as of ``marks``."""
        self._agreed[scope] = marks

    async def begin(
        self,
        scope: Scope,
        *,
        session_id: str | None = None,
        memory_id: str | None = None,
        memory_ids: Collection[str] = (),
    ) -> Erased:
        """Before evidence of ``session_id`` (or the record ``memory_id``, or the records
        ``memory_ids``; none: the whole user) is deleted: add erasure marks to the ledger (one
        per record or session), so work in flight anywhere follows the erase; returns which
        records it erases."""
        ids = {*memory_ids, *((memory_id,) if memory_id is not None else ())}
        if session_id is not None or ids:  # what the erased words were, for ``erase``
            words = self._erasing.setdefault(scope, set())
            async for rec in self.backend.scan(scope):
                if rec.id in ids or (session_id is not None and rec.session_id == session_id):
                    fact = Fact.of(rec)
                    words.update(_words(rec.text if fact is None else fact.text))
        nonce = uuid.uuid4().hex
        if session_id is not None:
            added = [f"s:{_key(session_id)}:{nonce}"]
        elif ids:
            added = [f"m:{_key(i)}:{nonce}" for i in sorted(ids)]
        else:
            added = [f"u::{nonce}"]
        await self.ledger.mark_saved(scope, ERASURES, added)
        marks = self._marks.setdefault(scope, set())
        marks.update(added)
        return self.erased_since(scope, marks - set(added))

    async def erase(self, scope: Scope, superseded: Collection[str] = ()) -> int:
        """After evidence was deleted (``begin`` first): the facts follow it (``agree``); return
        how many facts went. ``superseded``: records still there whose words their owner
        corrected (``update``): facts of the old words follow them as if they were erased."""
        marks = await self.read(scope)
        gone = await self.agree(scope, erased=self._erasing.pop(scope, set()), superseded=superseded)
        self.settled(scope, marks)
        return gone

    async def after_write(self, scope: Scope, before: set[str]) -> None:
        """Facts just written follow the evidence if an erase (any process's) came since the marks
        ``before`` were read or since the facts last agreed. Read after the write: an erase whose
        mark is not here yet deletes its evidence after this write, and its own ``agree`` then
        sees what this wrote."""
        marks = await self.read(scope)
        if marks - before or marks - self._agreed.get(scope, set()):
            await self.agree(scope)
            self.settled(scope, marks)

    async def agree(
        self,
        scope: Scope,
        records: list[MemoryRecord] | None = None,
        erased: set[str] | None = None,
        superseded: Collection[str] = (),
    ) -> int:
        """Make the user's facts agree with the evidence in the store (``records``: the user's
        records, already read). A fact whose evidence is all gone is deleted, one that lost some
        keeps the rest, unless its text holds a word of the erased evidence (``erased``: their
        words, when this process erased them) that the rest does not say: then it goes too. A
        fact the model reworded from a gone fact says it in its own evidence's words again; a
        fact that a gone fact replaced, or gone evidence retracted, holds again; the history
        keeps no id of gone evidence. Idempotent: any number of erases and workers may run it.
        Returns facts deleted."""
        if records is None:
            records = [rec async for rec in self.backend.scan(scope)]
        facts = {f.id: f for f in map(Fact.of, records) if f is not None}
        present = {r.id: r for r in records if not is_fact(r) and r.id not in superseded}
        gone: set[str] = set()
        changed: dict[str, Fact] = {}
        now = time.time()
        for f in facts.values():
            kept = [e for e in f.evidence if e in present]
            if not kept or (len(kept) < len(f.evidence) and _says_erased(f, [present[e] for e in kept], erased)):
                gone.add(f.id)
            elif len(kept) < len(f.evidence):
                f.evidence = kept
                f.sessions = list(dict.fromkeys(present[e].session_id for e in kept))
                f.note({"op": "evidence erased", "at": iso(now)})
                changed[f.id] = f
        ids = set(present)
        for f in facts.values():
            if f.id not in gone and _holds_again(f, facts, gone, ids, now):
                changed[f.id] = f
        if gone:
            await self.backend.delete(scope, sorted(gone))
        if changed:
            await self.backend.upsert([f.to_record() for f in changed.values()])
        return len(gone)


def _holds_again(f: Fact, facts: dict[str, Fact], gone: set[str], present: set[str], now: float) -> bool:
    """Mend ``f``, which stays, after ``gone`` facts and evidence not ``present`` went: its own
    words again if it was reworded from a gone fact, no gone evidence in its history, current
    again if what replaced or retracted it is gone; True when it changed."""
    changed = False
    if f.reworded_from is not None and (f.reworded_from in gone or f.reworded_from not in facts):
        f.unword(now)
        changed = True
    if f.forget(present):
        changed = True
    if f.current:
        return changed
    replaced = f.superseded_by is not None and (f.superseded_by in gone or f.superseded_by not in facts)
    retracted = f.superseded_by is None and f.retracted_by and not any(e in present for e in f.retracted_by)
    if replaced or retracted:
        f.reopen("what replaced it was erased" if replaced else "what retracted it was erased", now)
        changed = True
    return changed


def _words(text: str) -> set[str]:
    """The words of ``text`` as the full-text index holds them (stemmed, CJK bigrams and
    characters), function words left out."""
    return set(index_terms(text)) - _FUNCTION_WORDS


_FUNCTION_WORDS = frozenset(index_terms(" ".join(STOPWORDS)))


def _says_erased(fact: Fact, kept: list[MemoryRecord], erased: set[str] | None) -> bool:
    """Does ``fact`` hold a word of the erased evidence that its remaining evidence (``kept``)
    does not say? (A fact backed by its whole batch, because the model cited nothing, keeps
    the words of the one event that stated it.)"""
    if not erased:
        return False
    said = set().union(*(_words(r.text) for r in kept))
    return bool((_words(fact.text) | _words(fact.subject)) & erased - said)


def rekeyed_marks(marks: set[str], ids: Mapping[str, str], sessions: Mapping[str, str]) -> set[str]:
    """Erasure marks naming records and sessions that were given new ids (``ids``, ``sessions``: old
    -> new; a store re-keyed to NFC), each naming the new one with its nonce kept."""
    digests = {_key(old): _key(new) for table in (ids, sessions) for old, new in table.items() if old != new}
    out = set()
    for mark in marks:
        kind, _, rest = mark.partition(":")
        key, _, nonce = rest.partition(":")
        out.add(f"{kind}:{digests[key]}:{nonce}" if key in digests else mark)
    return out


def _key(value: str) -> str:
    """A short, colon-free digest of an id, as erasure marks hold it."""
    return hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:32]
