"""Deciding: what each fact a model proposed does to the user's facts.

The seam: ``Decisions(backend, scope, model, config, changed, store)``, one per batch.
``held(batch)`` finds the user's current facts the batch's events may touch and returns them
as the lines the combined call shows (refs ``f1``...); ``settle(ref, subject, text, evidence,
said)`` applies one proposed fact and keeps what it stands for under ``ref`` (``n1``...), so a
later proposal of the same answer can name it. ``changed`` collects every fact the batch made
or changed; nothing here writes.

How a proposal is settled:
- the same text as a current fact about the same subject links its evidence: nobody is asked;
- a decision the model gave with the proposal (``said``: the combined answer) is applied, on
  the target it names (a held fact shown, or an earlier fact of its answer, as that fact now
  stands: a fact this batch already replaced stands for its replacement);
- otherwise (the two-step form, or a combined answer without a decision for it) the store's
  search finds the similar current facts and, if there are any, the model is asked to
  reconcile (``RECONCILE_PROMPT``; agentmaker's SmartWriter).
UPDATE and DELETE supersede (``valid_until``, ``superseded_by``), never destroy. Guards on
every decision: one naming no current fact we showed, or any other answer, is an ADD; a fact
about another subject is never superseded (similarity is not contradiction); an older
statement never supersedes a newer fact (an UPDATE from it goes to history).

Why the held facts come from a search for the subject too: the combined call is asked before
any fact is worded, so the events' own words are the only query, and "I moved to Lisbon"
shares none with "The user lives in Porto". Facts are worded about their subject in the
third person (the prompts ask so): a search for ``SUBJECT_QUERY`` finds the user's facts
whatever words the events use; the events' searches rank first those they speak of.
"""

from __future__ import annotations

import logging
from typing import Any

from ..core.backend import Backend
from ..records import MemoryRecord, Scope, repair_unicode
from ..retrieval.text import query_terms
from .llm import ChatModel, FactsConfig
from .model import Fact, iso, normal, same_subject

log = logging.getLogger(__name__)

#: Hits one search fetches to find the current facts among evidence.
SIMILAR_FETCH = 30
#: What the user's own facts are worded about ("The user lives in Lisbon"): see the module docstring.
SUBJECT_QUERY = "user"
#: Longest fact or subject text kept from a model's answer.
MAX_FACT_CHARS = 1_000


class Decisions:
    def __init__(
        self,
        backend: Backend,
        scope: Scope,
        model: ChatModel,
        cfg: FactsConfig,
        changed: dict[str, Fact],
        store: bool = True,
    ) -> None:
        self.backend = backend
        self.scope = scope
        self.model = model
        self.cfg = cfg
        self.changed = changed
        """The batch's facts, new or changed (a rebuild's: all it made so far)."""
        self.store = store
        """False (a rebuild): the store's facts are not searched, only ``changed``."""
        self.shown: dict[str, Fact] = {}
        """The held facts shown to the model, by ref (``f1``...)."""
        self.made: dict[str, Fact | None] = {}
        """What each proposal stands for, by ref (``n1``...): None when it retracted a fact."""

    async def held(self, batch: list[MemoryRecord]) -> list[str]:
        """The current facts ``batch`` may touch, at most ``batch_similar``, as the model sees
        them (``"f1 (user): The user lives in Porto"``): those its user events' words find,
        then the others of the subject's search (a rebuild: the facts it made, by shared words)."""
        found: dict[str, Fact] = {}
        spoken = [r.text for r in batch if (r.role or "user") == "user"]
        for query in [*spoken, SUBJECT_QUERY] if self.store else []:
            for fact in await self._search(query):
                found.setdefault(fact.id, fact)
        words = set().union(*(query_terms(t) for t in spoken))
        shown = [*found.values(), *self._fresh(words, found)][: self.cfg.batch_similar]
        self.shown = {f"f{i}": f for i, f in enumerate(shown, 1)}
        return [f"{k} ({f.subject}): {f.text}" for k, f in self.shown.items()]

    async def settle(
        self, ref: str, subject: str, text: str, evidence: list[MemoryRecord], said: dict[str, Any] | None
    ) -> None:
        """Apply the proposed fact ``text`` (see the module docstring); ``said`` is the model's
        answer item when the call also decided (None: the two-step form)."""
        similar = await self.similar(text)
        shown = [f for f in map(self.standing, self.shown.values()) if f is not None]
        alike = (f for f in (*similar, *shown) if normal(f.text) == normal(text) and same_subject(f.subject, subject))
        same = next(alike, None)
        if same is not None:  # said again: link the evidence, ask nobody
            if same.link(evidence, "confirmed", max(r.timestamp for r in evidence)):
                self.changed[same.id] = same
            self.made[ref] = same
            return
        decision = said.get("decision") if said is not None else None
        if said is not None and isinstance(decision, str):
            target = self.standing({**self.shown, **self.made}.get(str(said.get("target"))))
            now = said_text(said.get("now"))
        elif not similar:
            decision, target, now = "ADD", None, ""
        else:
            refs = {f"f{i}": f for i, f in enumerate(similar, 1)}
            task = {"task": "reconcile", "new": {"subject": subject, "text": text}, "existing": listing(refs)}
            answer = await self.model.ask(self.cfg.reconcile_prompt, task)
            decision, target = str(answer.get("decision") or ""), refs.get(str(answer.get("target")))
            now = said_text(answer.get("text"))
        self.made[ref] = self._apply(subject, text, evidence, decision.upper(), target, now)

    async def similar(self, text: str) -> list[Fact]:
        """The current facts most like ``text``, at most ``similar``: this batch's (by shared
        words), then the store's search (seen through this batch's changes)."""
        found = {f.id: f for f in await self._search(text)} if self.store else {}
        return [*self._fresh(set(query_terms(text)), found), *found.values()][: self.cfg.similar]

    def standing(self, fact: Fact | None) -> Fact | None:
        """``fact`` as it stands in this batch: its changed version, or what replaced it here;
        None when nothing current stands for it."""
        seen: set[str] = set()
        while fact is not None and fact.id not in seen:
            seen.add(fact.id)
            fact = self.changed.get(fact.id, fact)
            if fact.current:
                return fact
            fact = self._known(fact.superseded_by)
        return None

    def _known(self, fact_id: str | None) -> Fact | None:
        """The fact ``fact_id`` among this batch's changes and the held facts shown."""
        return self.changed.get(fact_id or "") or next((f for f in self.shown.values() if f.id == fact_id), None)

    async def _search(self, query: str) -> list[Fact]:
        """The current facts among the store's hits for ``query``, seen through this batch's changes."""
        found = []
        for hit in await self.backend.search(self.scope, query, SIMILAR_FETCH):
            fact = Fact.of(hit.record)
            if fact is not None and (fact := self.changed.get(fact.id, fact)).current:
                found.append(fact)
        return found

    def _fresh(self, words: set[str], found: dict[str, Fact]) -> list[Fact]:
        """This batch's current facts not in ``found`` (too new for the store's search), those
        sharing most ``words`` first (oldest first among equals)."""
        fresh = [f for f in self.changed.values() if f.id not in found and f.current]
        fresh.sort(key=lambda f: -len(words & set(query_terms(f.text))))
        return fresh

    def _apply(
        self, subject: str, text: str, evidence: list[MemoryRecord], decision: str, target: Fact | None, now: str
    ) -> Fact | None:
        """Record what ``decision`` on ``target`` does in ``changed`` (``now``: an UPDATE's text
        as it now stands); the fact that stands for the proposal (None: it retracted one)."""
        at = max(r.timestamp for r in evidence)
        if decision in ("UPDATE", "DELETE", "NOOP") and (target is None or not same_subject(target.subject, subject)):
            log.info("fact model chose %s on %s for a fact about %r: kept both (ADD)", decision, target, subject)
            decision = "ADD"
        if decision == "NOOP" and target is not None:
            if target.link(evidence, "confirmed", at):
                self.changed[target.id] = target
            return target
        if decision == "DELETE" and target is not None:
            if at >= target.valid_from:  # an older statement never retracts a newer fact
                target.supersede(at, None, evidence, "retracted")
                self.changed[target.id] = target
            return None
        said = now if decision == "UPDATE" else ""
        new = Fact.new(self.scope, subject, said or text, evidence)
        if said and target is not None and normal(said) != normal(text):  # worded from the old fact too
            new.own_text, new.reworded_from = text, target.id
        if decision == "UPDATE" and target is not None and at >= target.valid_from:
            new.history[-1].update(op="updated", replaces=target.id)
            target.supersede(at, new.id, evidence, "superseded")
            self.changed[target.id] = target
        elif decision == "UPDATE" and target is not None:  # older than what it would replace: history only
            new.supersede(target.valid_from, target.id, [], "superseded")
        self.changed[new.id] = new  # ADD, or anything the model should not have said: keep the fact (fail safe)
        return new


def listing(refs: dict[str, Fact]) -> list[dict[str, Any]]:
    """Facts as the model sees them: a short ref (never our ids), subject, text, since when."""
    return [{"ref": k, "subject": f.subject, "text": f.text, "since": iso(f.valid_from)} for k, f in refs.items()]


def event_lines(refs: dict[str, MemoryRecord]) -> list[str]:
    """Events as the combined call shows them: ``"e1 user 2024-05-01: I moved to Lisbon"``, the
    date only where it changes (an ISO time on every event was a third of the request)."""
    lines: list[str] = []
    day = ""
    for k, r in refs.items():
        date = r.iso_timestamp()[:10]
        lines.append(f"{k} {r.role or 'unknown'}{'' if date == day else ' ' + date}: {r.text}")
        day = date
    return lines


def said_text(value: object) -> str:
    """A string from a model's answer as we keep it: repaired Unicode (a model cuts emoji in
    half too), trimmed, at most ``MAX_FACT_CHARS``; "" for anything that is no text."""
    if not isinstance(value, str):
        return ""
    return repair_unicode(value).replace("\x00", "").strip()[:MAX_FACT_CHARS].strip()
