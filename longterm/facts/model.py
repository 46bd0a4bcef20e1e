"""Facts as records: how a fact lives in the store, beside the evidence it came from.

The seam: ``Fact`` turns into a ``MemoryRecord`` (``to_record``) and back (``Fact.of``), and
``split_hits`` sorts a search's hits into current facts and evidence; ``relinked`` makes a fact
follow records given new ids (a store re-keyed to NFC). Nothing here talks to an engine or a model.

Why so: facts are records of another kind in the same store and scope, so every engine
holds them with no change. A fact record is marked in ``metadata["longterm"]`` (``kind:
"fact"``, validity, ``superseded_by``, evidence record ids, the sessions they came from, an
audit history). A superseded fact is rewritten with empty ``text``: full text indexes
nothing, so ordinary search does not find it, while its content and metadata keep it
readable for history (search also drops it by its metadata, for engines that match empty
text by vector).

Session ids no user can send: fact records live under ``FACTS_SESSION`` and the ledger of
distilled evidence under ``distilled_session(session_id)``. Both start with a NUL character,
which ``records.check_id`` refuses in every id a caller passes, so no user session can share
a fact's records or its ledger, whatever it is called.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any, Literal

from ..records import Hit, MemoryRecord, Scope, record_id

#: Session id of fact records (NUL: no caller's session id can be it; see the module docstring).
FACTS_SESSION = "\x00facts"
#: ``metadata`` key that marks a fact record.
META = "longterm"
KIND = "fact"
AUTHOR = "longterm-facts"
#: What ``search_memory`` returns: current facts first, then evidence ("all"), or one of them.
SearchKind = Literal["all", "facts", "evidence"]
KINDS = ("all", "facts", "evidence")


def distilled_session(session_id: str) -> str:
    """The ledger session that lists which events of ``session_id`` were distilled into facts."""
    return f"{FACTS_SESSION}\x00{session_id}"


def normal(text: str) -> str:
    """A fact's text for comparison: case and spacing do not make another fact."""
    return " ".join(text.casefold().split()).rstrip(".")


def same_subject(a: str, b: str) -> bool:
    """Are ``a`` and ``b`` the same person? (the way facts compare their subjects)"""
    return normal(a) == normal(b)


def iso(ts: float | None) -> str | None:
    return None if ts is None else datetime.fromtimestamp(ts, tz=timezone.utc).isoformat()


@dataclass
class Fact:
    """One fact about a user (or someone the user spoke of: ``subject``)."""

    id: str
    app_name: str
    user_id: str
    text: str
    subject: str
    valid_from: float
    """When its newest evidence was said (not when the model ran: a rebuild gives the same facts)."""
    valid_until: float | None = None
    superseded_by: str | None = None
    evidence: list[str] = field(default_factory=list)
    """Record ids of the events it came from."""
    sessions: list[str] = field(default_factory=list)
    """Session ids of that evidence."""
    history: list[dict[str, Any]] = field(default_factory=list)
    retracted_by: list[str] = field(default_factory=list)
    """Record ids of the evidence that retracted it (a DELETE): erased, the fact holds again."""
    key: str = ""
    """Its record's event id: ``id`` is ``record_id(app, user, FACTS_SESSION, key)``, as every record's."""
    own_text: str | None = None
    """When the model reworded it from the fact it replaced (``reworded_from``): the fact in its
    own evidence's words, what it says once that fact is erased (no erased word outlives it)."""
    reworded_from: str | None = None

    @property
    def current(self) -> bool:
        return self.valid_until is None

    @staticmethod
    def new(scope: Scope, subject: str, text: str, evidence: list[MemoryRecord]) -> Fact:
        """A fact first said in ``evidence``; its id depends only on its text and first evidence."""
        first = min(evidence, key=lambda r: (r.timestamp, r.id))
        key = hashlib.sha256(f"{normal(text)}\x00{first.id}".encode()).hexdigest()[:32]
        at = max(r.timestamp for r in evidence)
        fact = Fact(
            id=record_id(scope.app_name, scope.user_id, FACTS_SESSION, key),
            key=key,
            app_name=scope.app_name,
            user_id=scope.user_id,
            text=text,
            subject=subject,
            valid_from=at,
        )
        fact.link(evidence, "added", at)
        return fact

    def link(self, evidence: list[MemoryRecord], op: str, at: float, **more: Any) -> bool:
        """Record ``op`` with ``evidence`` in the history; False when it adds nothing new."""
        ids = [r.id for r in evidence if r.id not in self.evidence]
        if not ids and op == "confirmed":
            return False
        self.evidence = _bounded(self.evidence + ids, MAX_EVIDENCE)
        self.sessions += sorted({r.session_id for r in evidence} - set(self.sessions))
        self.note({"op": op, "at": iso(at), "evidence": [r.id for r in evidence][:MAX_EVIDENCE], **more})
        return True

    def note(self, entry: dict[str, Any]) -> None:
        """Append to the history, which keeps its first entry and the latest ones (a fact said
        every day for years stays a record every engine can hold)."""
        self.history = _bounded([*self.history, entry], MAX_HISTORY)

    def supersede(self, at: float, by: str | None, evidence: list[MemoryRecord], op: str) -> None:
        self.valid_until = max(at, self.valid_from)
        self.superseded_by = by
        self.retracted_by = [r.id for r in evidence][:MAX_EVIDENCE] if by is None else []
        self.note({"op": op, "at": iso(at), "by": by, "evidence": [r.id for r in evidence][:MAX_EVIDENCE]})

    def unword(self, at: float) -> None:
        """Back to its own evidence's words: the fact it was reworded from is gone."""
        if self.own_text is not None:
            self.text = self.own_text
        self.own_text = self.reworded_from = None
        self.note({"op": "reworded", "at": iso(at), "because": "the fact it was reworded from was erased"})

    def forget(self, present: set[str]) -> bool:
        """Drop from its history the evidence ids no longer in the store (``present``); True when
        something went."""
        changed = False
        for entry in self.history:
            ids = entry.get("evidence")
            if isinstance(ids, list) and any(e not in present for e in ids):
                entry["evidence"] = [e for e in ids if e in present]
                changed = True
        return changed

    def reopen(self, because: str, at: float) -> None:
        """Current again: what replaced or retracted it is gone."""
        self.valid_until = self.superseded_by = None
        self.retracted_by = []
        self.note({"op": "reopened", "at": iso(at), "because": because})

    def to_record(self) -> MemoryRecord:
        meta = {k: v for k, v in asdict(self).items() if k not in ("id", "app_name", "user_id", "key")}
        return MemoryRecord(
            id=self.id,
            app_name=self.app_name,
            user_id=self.user_id,
            session_id=FACTS_SESSION,
            event_id=self.key,
            author=AUTHOR,
            role="user",
            event_types=[KIND],
            text=self.text if self.current else "",
            content={"role": "user", "parts": [{"text": self.text}]},
            timestamp=self.valid_from,
            metadata={META: {"kind": KIND, **meta}},
        )

    @staticmethod
    def of(record: MemoryRecord) -> Fact | None:
        """The fact a record holds; None for evidence."""
        meta = record.metadata.get(META)
        if record.session_id != FACTS_SESSION or not isinstance(meta, dict) or meta.get("kind") != KIND:
            return None  # only the fact layer writes under FACTS_SESSION: no user id holds a NUL
        fields = {k: meta[k] for k in _STORED if k in meta}
        return Fact(id=record.id, app_name=record.app_name, user_id=record.user_id, key=record.event_id, **fields)

    def as_dict(self) -> dict[str, Any]:
        """For people and JSON: times as ISO 8601."""
        d = asdict(self)
        del d["key"]
        d.update(valid_from=iso(self.valid_from), valid_until=iso(self.valid_until))
        return d


_STORED = (
    "text",
    "subject",
    "valid_from",
    "valid_until",
    "superseded_by",
    "evidence",
    "sessions",
    "history",
    "retracted_by",
    "own_text",
    "reworded_from",
)
#: A fact keeps its first and latest evidence ids and history entries up to these counts.
MAX_EVIDENCE = 500
MAX_HISTORY = 100


def _bounded(items: list[Any], limit: int) -> list[Any]:
    return items if len(items) <= limit else [items[0], *items[len(items) - limit + 1 :]]


#: Fields of a fact's metadata holding record ids (its evidence's, or other facts'): ``relinked`` maps them.
_LINKS = ("evidence", "retracted_by", "superseded_by", "reworded_from")


def relinked(record: MemoryRecord, ids: Mapping[str, str], session: Callable[[str], str]) -> MemoryRecord:
    """A fact record (evidence as it is) whose links follow records given new ids (``ids``: old id ->
    new, a store's ids re-keyed to NFC): its evidence, what replaced, retracted or was reworded into
    it, the ids in its history, and its sessions (``session``: old session id -> new)."""
    meta = record.metadata.get(META)
    if not is_fact(record) or not isinstance(meta, dict):
        return record

    def link(value: Any) -> Any:
        if isinstance(value, str):
            return ids.get(value, value)
        return [link(v) for v in value] if isinstance(value, list) else value

    new = {**meta, **{k: link(meta[k]) for k in _LINKS if k in meta}}
    if isinstance(meta.get("sessions"), list):
        new["sessions"] = list(dict.fromkeys(session(s) if isinstance(s, str) else s for s in meta["sessions"]))
    if isinstance(meta.get("history"), list):
        new["history"] = [{k: link(v) for k, v in e.items()} if isinstance(e, dict) else e for e in meta["history"]]
    if new == meta:
        return record
    return record.model_copy(update={"metadata": {**record.metadata, META: new}})


def is_fact(record: MemoryRecord) -> bool:
    """Only the fact layer writes under ``FACTS_SESSION``: no user can send a session id with a NUL,
    so no memory's metadata can make it pass for a fact."""
    return record.session_id == FACTS_SESSION


def split_hits(hits: list[Hit], kind: SearchKind) -> list[Hit]:
    """Current facts first (``"all"``), or only facts, or only evidence; superseded facts never."""
    facts, evidence = [], []
    for h in hits:
        if not is_fact(h.record):
            evidence.append(h)
            continue
        fact = Fact.of(h.record)
        if fact is not None and fact.current:
            facts.append(h)
    if kind == "facts":
        return facts
    if kind == "evidence":
        return evidence
    return facts + evidence


def trail(every: dict[str, Fact], fact_id: str) -> list[Fact]:
    """``fact_id``'s history among ``every`` fact of a user (by id), oldest first: the facts it
    replaced, itself, and what replaced it (empty: no such fact)."""
    if fact_id not in every:
        return []
    seen, todo = {fact_id}, [fact_id]
    while todo:
        f = every[todo.pop()]
        linked = [g.id for g in every.values() if g.superseded_by == f.id]
        if f.superseded_by in every:
            linked.append(f.superseded_by)
        for i in linked:
            if i not in seen:
                seen.add(i)
                todo.append(i)
    return sorted((every[i] for i in seen), key=lambda g: (g.valid_from, g.id))
