"""Distilling: a user's saved evidence turned into facts, batch by batch, exactly once.

The seam: ``Distiller(backend, ledger, erasures, requeue, config, model)``.
``catch_up(scope, records)`` is the worker's work: it distils what of ``records`` (and, the
first time this process works for the user, of all the user's records) the ledger has not
seen distilled, and hands what it did not do to ``requeue``. ``distill(scope, batch, ...)``
turns one batch into facts (a rebuild calls it with its own model and ``staged`` facts), and
``mark`` notes a batch distilled. Everything goes through the backend contract (``upsert``,
``search``, ``scan``) and the store's own ledger: no engine knows facts exist.

How a batch of evidence becomes facts:
1. **extract**: one model call reads up to ``batch_events`` events and proposes facts,
   each naming its subject and the events it came from;
2. **reconcile**: for each proposal the store's own search finds the user's similar current
   facts (seen through what this batch already changed); the same text is a NOOP without
   asking; otherwise the model decides ADD, UPDATE, DELETE or NOOP (agentmaker's
   SmartWriter). UPDATE and DELETE supersede (``valid_until``, ``superseded_by``), never
   destroy. Guards: a decision naming no fact we showed, or any other answer, is an ADD; a
   fact about another subject is never superseded (similarity is not contradiction); an
   older statement never supersedes a newer fact (an UPDATE from it goes to history);
3. **write, then mark**: the batch's new and changed facts are written in one upsert, they
   follow any erase that came meanwhile (``Erasures.after_write``), and only then are its
   events marked in the ledger under ``distilled_session(session_id)``. A failure before that
   leaves them unmarked and the whole batch is tried again later; fact ids are derived from
   text and first evidence, so a retry rewrites what it wrote.

Why retried, never skipped: a model's unusable answer is a failure like an outage; only a
fault of ours (``POISON_STRIKES`` in a row) skips a batch. A process that stopped with work
queued loses nothing: the first time a process works for a user, it scans that user's
records for evidence the ledger has not seen distilled.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import Any

from .. import telemetry
from ..core.backend import Backend
from ..core.ledger import Ledger
from ..errors import BackendUnavailableError
from ..records import MemoryRecord, Scope, repair_unicode
from ..retrieval.text import query_terms
from .erasure import Erasures
from .llm import ChatModel, FactsConfig, ModelError
from .model import Fact, distilled_session, is_fact, iso, normal, same_subject

log = logging.getLogger(__name__)

#: Hits a reconciliation search fetches to find the similar current facts among evidence.
SIMILAR_FETCH = 30
#: Longest fact or subject text kept from a model's answer.
MAX_FACT_CHARS = 1_000
#: A batch failing this many times in a row for a fault of ours (our code, evidence that
#: cannot be read or written; never the model's answer, never an outage) is skipped and logged.
POISON_STRIKES = 3


class Distiller:
    def __init__(
        self,
        backend: Backend,
        ledger: Ledger,
        erasures: Erasures,
        requeue: Callable[[Scope, list[MemoryRecord]], None],
        config: FactsConfig,
        model: ChatModel,
    ) -> None:
        self.backend = backend
        self.ledger = ledger
        self.erasures = erasures
        self.requeue = requeue
        self.config = config
        self.model = model
        self._seen: set[Scope] = set()
        """Users whose records this process has read for evidence not yet distilled."""
        self._strikes: dict[str, int] = {}
        """Per batch (by its first record), failures in a row for a fault of ours."""

    def rescan(self, scope: Scope) -> None:
        """The user's next ``catch_up`` reads all the user's records again."""
        self._seen.discard(scope)

    def scanned(self, scope: Scope) -> None:
        """All the user's evidence is distilled (a rebuild): no need to read it for what is left."""
        self._seen.add(scope)

    async def catch_up(self, scope: Scope, queued: dict[str, MemoryRecord]) -> None:
        """Distil the user's evidence in ``queued`` (and, the first time here, in the store) that
        the ledger has not seen distilled, oldest first, a batch at a time; a batch that failed
        and what follows it go back to ``requeue`` before the failure is raised."""
        records = dict(queued)
        if scope not in self._seen:  # first time for this user here: what did an earlier process leave?
            marks = await self.erasures.read(scope)
            every = [rec async for rec in self.backend.scan(scope)]
            records.update((r.id, r) for r in every if not is_fact(r))
            await self.erasures.agree(scope, every)  # an erase cut short before its facts followed
            self.erasures.settled(scope, marks)
        by_session: dict[str, list[MemoryRecord]] = {}
        for rec in records.values():
            by_session.setdefault(rec.session_id, []).append(rec)
        todo = []
        for sid, recs in by_session.items():
            done = await self.ledger.saved(scope, distilled_session(sid))
            todo += [r for r in recs if r.event_id not in done]
        todo.sort(key=lambda r: (r.timestamp, r.id))
        self._seen.add(scope)  # from here on, what is left to do is in the queue
        for i in range(0, len(todo), self.config.batch_events):
            batch = todo[i : i + self.config.batch_events]
            before = await self.erasures.read(scope)
            try:
                await self.distill(scope, batch, self.model, self.config, before)
                self._strikes.pop(batch[0].id, None)
            except (ModelError, BackendUnavailableError, asyncio.CancelledError):
                self._requeue(scope, todo[i:], before)  # the model's answer or an outage: retried, never skipped
                raise
            except Exception as exc:
                strikes = self._strikes[batch[0].id] = self._strikes.get(batch[0].id, 0) + 1
                if strikes < POISON_STRIKES:
                    self._requeue(scope, todo[i:], before)
                    raise
                del self._strikes[batch[0].id]  # not the model, not an outage: skip it, keep the rest going
                log.error("facts: a batch of %d events failed %d times (%s); skipped", len(batch), strikes, exc)
                await self.mark(scope, batch)

    def _requeue(self, scope: Scope, records: list[MemoryRecord], before: set[str]) -> None:
        """Queue ``records`` again, but those an erase since the marks ``before`` took away."""
        erased = self.erasures.erased_since(scope, before)
        self.requeue(scope, [r for r in records if not erased(r)])

    async def mark(self, scope: Scope, batch: Iterable[MemoryRecord]) -> None:
        """Note the events of ``batch`` distilled, in the ledger of each one's session."""
        by_session: dict[str, list[str]] = {}
        for r in batch:
            by_session.setdefault(r.session_id, []).append(r.event_id)
        for sid, eids in by_session.items():
            await self.ledger.mark_saved(scope, distilled_session(sid), eids)

    async def distill(
        self,
        scope: Scope,
        batch: list[MemoryRecord],
        model: ChatModel,
        cfg: FactsConfig,
        before: set[str],
        staged: dict[str, Fact] | None = None,
    ) -> None:
        """Extract facts from ``batch`` and reconcile each; write what changed in one upsert;
        make the facts agree with the evidence if an erase came since the marks ``before`` were
        read (or since they last agreed); then mark the batch distilled. With ``staged`` (a
        rebuild), the facts are kept there and nothing is written."""
        with telemetry.span("longterm.facts.distill", records=len(batch), rebuild=staged is not None):
            await self._distill_batch(scope, batch, model, cfg, before, staged)

    async def _distill_batch(
        self,
        scope: Scope,
        batch: list[MemoryRecord],
        model: ChatModel,
        cfg: FactsConfig,
        before: set[str],
        staged: dict[str, Fact] | None,
    ) -> None:
        refs = {f"e{i}": r for i, r in enumerate(batch, 1)}
        events = [{"id": k, "role": r.role, "time": r.iso_timestamp(), "text": r.text} for k, r in refs.items()]
        answer = await model.ask(cfg.extract_prompt, {"task": "extract", "events": events})
        proposals = answer.get("facts")
        if not isinstance(proposals, list):
            raise ModelError(f"the fact model's extraction has no 'facts' list: {str(answer)[:200]!r}")
        # this batch's facts, new or changed: seen by its later proposals (a rebuild's: all so far)
        changed: dict[str, Fact] = {} if staged is None else staged
        for p in proposals:
            text = said_text(p.get("text")) if isinstance(p, dict) else ""
            if not text:
                continue  # one unusable proposal does not cost the others
            cited = p.get("evidence")
            evidence = [refs[e] for e in cited if isinstance(e, str) and e in refs] if isinstance(cited, list) else []
            subject = said_text(p.get("subject")) or "user"
            await self._reconcile(scope, subject, text, evidence or batch, changed, model, cfg, staged is None)
        if staged is not None:
            return
        if changed:
            await self.backend.upsert([f.to_record() for f in changed.values()])
            await self.erasures.after_write(scope, before)
        await self.mark(scope, batch)  # only now: the facts landed

    async def _similar(self, scope: Scope, text: str, k: int, changed: dict[str, Fact], store: bool) -> list[Fact]:
        """The current facts most like ``text``: the store's search, seen through this batch's
        changes (``store`` False, a rebuild: only the facts it made, ranked by shared words)."""
        found: dict[str, Fact] = {}
        if store:
            for hit in await self.backend.search(scope, text, SIMILAR_FETCH):
                fact = Fact.of(hit.record)
                if fact is not None:
                    found[fact.id] = changed.get(fact.id, fact)
        words = set(query_terms(text))
        fresh = [f for f in changed.values() if f.id not in found and f.current]  # too new for the store's search
        fresh.sort(key=lambda f: -len(words & set(query_terms(f.text))))  # stable: oldest first among equals
        return [f for f in (*fresh, *found.values()) if f.current][:k]

    async def _reconcile(
        self,
        scope: Scope,
        subject: str,
        text: str,
        evidence: list[MemoryRecord],
        changed: dict[str, Fact],
        model: ChatModel,
        cfg: FactsConfig,
        store: bool = True,
    ) -> None:
        """Decide what ``text`` does to the user's facts; record every fact it changes in ``changed``."""
        at = max(r.timestamp for r in evidence)
        similar = await self._similar(scope, text, cfg.similar, changed, store)
        same = next((f for f in similar if normal(f.text) == normal(text) and same_subject(f.subject, subject)), None)
        if same is not None:  # said again: link the evidence, ask nobody
            if same.link(evidence, "confirmed", at):
                changed[same.id] = same
            return
        if not similar:
            new = Fact.new(scope, subject, text, evidence)
            changed[new.id] = new
            return
        refs = {f"f{i}": f for i, f in enumerate(similar, 1)}
        task = {"task": "reconcile", "new": {"subject": subject, "text": text}, "existing": listing(refs)}
        answer = await model.ask(cfg.reconcile_prompt, task)
        decision = str(answer.get("decision") or "").upper()
        target = refs.get(str(answer.get("target")))
        if decision in ("UPDATE", "DELETE", "NOOP") and (target is None or not same_subject(target.subject, subject)):
            log.info("fact model chose %s on %s for a fact about %r: kept both (ADD)", decision, target, subject)
            decision = "ADD"
        if decision == "NOOP" and target is not None:
            if target.link(evidence, "confirmed", at):
                changed[target.id] = target
            return
        if decision == "DELETE" and target is not None:
            if at >= target.valid_from:  # an older statement never retracts a newer fact
                target.supersede(at, None, evidence, "retracted")
                changed[target.id] = target
            return
        said = said_text(answer.get("text")) if decision == "UPDATE" else ""
        new = Fact.new(scope, subject, said or text, evidence)
        if said and target is not None and normal(said) != normal(text):  # worded from the old fact too
            new.own_text, new.reworded_from = text, target.id
        if decision == "UPDATE" and target is not None and at >= target.valid_from:
            new.history[-1].update(op="updated", replaces=target.id)
            target.supersede(at, new.id, evidence, "superseded")
            changed[target.id] = target
        elif decision == "UPDATE" and target is not None:  # older than what it would replace: history only
            new.supersede(target.valid_from, target.id, [], "superseded")
        changed[new.id] = new  # ADD, or anything the model should not have said: keep the fact (fail safe)


def listing(refs: dict[str, Fact]) -> list[dict[str, Any]]:
    """Facts as the model sees them: a short ref (never our ids), subject, text, since when."""
    return [{"ref": k, "subject": f.subject, "text": f.text, "since": iso(f.valid_from)} for k, f in refs.items()]


def said_text(value: object) -> str:
    """A string from a model's answer as we keep it: repaired Unicode (a model cuts emoji in
    half too), trimmed, at most ``MAX_FACT_CHARS``; "" for anything that is no text."""
    if not isinstance(value, str):
        return ""
    return repair_unicode(value).replace("\x00", "").strip()[:MAX_FACT_CHARS].strip()
