"""The fact layer: evidence in, facts out, in the background, exactly once.

The seam: ``FactLayer(backend, ledger, config)``. The facade calls ``schedule(scope,
records)`` after every save (it only queues: a reply never waits for a model), ``flush()``
to wait for what is queued, and the read and maintenance calls (``profile``, ``facts``,
``history``, ``consolidate``, ``rebuild``, ``erase``). Everything goes through the backend
contract (``upsert``, ``search``, ``delete``, ``scan``) and the store's own ledger
(``saved``/``mark_saved``): no engine knows facts exist.

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
3. **write, then mark**: the batch's new and changed facts are written in one upsert, and
   only then are its events marked in the ledger under ``distilled_session(session_id)``. A
   failure before that leaves them unmarked and the whole batch is tried again later; fact
   ids are derived from text and first evidence, so a retry rewrites what it wrote.

Facts follow their evidence (``_agree``): a fact whose evidence is all gone goes, one that
loses some keeps the rest, and a fact that a gone fact or gone evidence had replaced or
retracted holds again. An erase runs it after the evidence is deleted, and never waits for
a model. Work in flight elsewhere (another thread's batch, another process) is caught by
erasure marks: an erase first adds a mark to the store's ledger (``ERASURES``); a batch,
consolidation or rebuild reads the marks before it starts and after it wrote, and runs
``_agree`` when a mark appeared (or one its facts never agreed with), so a fact distilled
from evidence erased meanwhile does not stay. A rebuild distils into memory and replaces
the old facts only once all of it worked.

Retries: a failed batch is kept and tried again after ``retry_seconds`` (doubling after each
failure in a row, up to ``MAX_BACKOFF`` times), at the next save of that user and on
``flush``. A model's unusable answer is a failure like an outage: retried, never skipped;
only a fault of ours (``POISON_STRIKES``) skips a batch. A process that stopped with work
queued loses nothing: the first time a process works for a user, it scans that user's
records for evidence the ledger has not seen distilled.

The worker is one thread with its own event loop: model calls and reconciliation never run
on a caller's loop, and one user's batches never reconcile at the same time.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import threading
import time
import uuid
from collections.abc import Callable, Coroutine, Iterable
from typing import Any, TypeVar

from .. import telemetry
from ..errors import BackendUnavailableError, InvalidInputError
from ..records import MemoryRecord, Scope, repair_unicode
from ..retrieval.text import STOPWORDS, index_terms, query_terms
from .llm import ChatModel, FactsConfig, ModelError
from .model import FACTS_SESSION, Fact, distilled_session, is_fact, iso, normal, trail

log = logging.getLogger(__name__)
T = TypeVar("T")

#: Hits a reconciliation search fetches to find the similar current facts among evidence.
SIMILAR_FETCH = 30
#: Ledger session of erasure marks (a NUL-led id no caller can send; see ``model``).
ERASURES = f"{FACTS_SESSION}\x00\x00erasures"
#: Longest fact or subject text kept from a model's answer.
MAX_FACT_CHARS = 1_000
#: A batch failing this many times in a row for a fault of ours (our code, evidence that
#: cannot be read or written; never the model's answer, never an outage) is skipped and logged.
POISON_STRIKES = 3
#: A user's retries wait ``retry_seconds``, doubling after each failure in a row up to this factor.
MAX_BACKOFF = 64


class FactLayer:
    def __init__(self, backend: Any, ledger: Any, config: FactsConfig, model: ChatModel | None = None) -> None:
        self.backend = backend
        self.ledger = ledger
        self.config = config
        self.model = model or ChatModel(config)
        self.last_error: str | None = None
        """Why the last batch failed (None once a pass succeeded)."""
        self._lock = threading.Lock()
        self._queued: dict[Scope, dict[str, MemoryRecord]] = {}
        self._seen: set[Scope] = set()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="longterm-facts", daemon=True)
        self._thread.start()
        self._busy: asyncio.Lock | None = None
        self._strikes: dict[str, int] = {}
        self._marks: dict[Scope, set[str]] = {}
        self._agreed: dict[Scope, set[str]] = {}
        """Per user, the erasure marks its facts were last made to agree with (``_agree``)."""
        self._erasing: dict[Scope, set[str]] = {}
        """Per user, the words of evidence this process is erasing (``begin_erase`` to ``erase``);
        in memory only, never written."""
        self._failures: dict[Scope, int] = {}
        """Per user, passes failed in a row (the backoff's exponent)."""
        self._due: dict[Scope, float] = {}
        """Per user that failed, the loop time before which the retry timer leaves it alone."""
        self._pass: asyncio.Task[None] | None = None
        self._retry: asyncio.TimerHandle | None = None
        self._closed = False

    # -- the queue --------------------------------------------------------------------------

    def schedule(self, scope: Scope, records: list[MemoryRecord]) -> None:
        """Queue saved evidence for distilling; returns at once, never raises."""
        if self._closed:
            return
        with self._lock:
            queued = self._queued.setdefault(scope, {})
            queued.update((r.id, r) for r in records if not is_fact(r))
            self._due.pop(scope, None)  # the user's next save tries at once, backoff or not
        self._loop.call_soon_threadsafe(self._wake)

    def pending(self) -> int:
        """Evidence records waiting in this process's queue (a user whose records are still to
        be read counts one); 0 when nothing waits."""
        with self._lock:
            return sum(len(q) or 1 for q in self._queued.values())

    def _wake(self) -> None:
        if self._pass is None or self._pass.done():
            self._pass = self._loop.create_task(self._drain())

    async def _drain(self) -> None:
        """Work until every queued user that is due was tried; a user whose batch failed stays
        queued, backs off (``_failed``) and is not tried again in this pass; records queued
        meanwhile are taken in this pass."""
        if self._busy is None:
            self._busy = asyncio.Lock()
        async with self._busy:
            failed: set[Scope] = set()
            while True:
                now = self._loop.time()
                with self._lock:
                    due = (s for s in self._queued if s not in failed and self._due.get(s, now) <= now)
                    scope = next(due, None)
                    queued = self._queued.pop(scope, {}) if scope is not None else {}
                if scope is None:
                    break
                try:
                    await self._catch_up(scope, queued)
                    self.last_error = None
                    self._failures.pop(scope, None)
                    with self._lock:
                        self._due.pop(scope, None)
                except Exception as exc:
                    failed.add(scope)
                    self.last_error = str(exc)
                    wait = self._failed(scope)
                    log.warning(
                        "facts for a user of %r were not distilled (%s); retrying in %g s", scope.app_name, exc, wait
                    )
                    with self._lock:
                        self._queued.setdefault(scope, {}).update(queued)
            self._arm_retry()

    def _failed(self, scope: Scope) -> float:
        """Back the user off: ``retry_seconds``, doubled for each failure in a row (up to
        ``MAX_BACKOFF`` times); returns the wait. A model that is down or answers nonsense is
        asked again, never hammered."""
        n = self._failures[scope] = self._failures.get(scope, 0) + 1
        wait = self.config.retry_seconds * min(2 ** (n - 1), MAX_BACKOFF)
        with self._lock:
            self._due[scope] = self._loop.time() + wait
        return wait

    def _arm_retry(self) -> None:
        """Wake the worker when the first backed-off user that still has work is due."""
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None
        with self._lock:
            due = [self._due[s] for s in self._queued if s in self._due]
        if due and not self._closed:
            self._retry = self._loop.call_at(min(due), self._wake)

    async def catch_up(self, scope: Scope) -> int:
        """Distil whatever evidence of the user the ledger has not seen distilled (after a
        restart, with no new save to trigger it); return how many records still wait."""
        with self._lock:
            self._queued.setdefault(scope, {})
            self._seen.discard(scope)
        return await self.flush()

    async def flush(self) -> int:
        """Wait until what is queued was tried once more; return how many records still wait."""
        await self._on_worker(self._flush())
        return self.pending()

    async def _flush(self) -> None:
        if self._pass is not None and not self._pass.done():
            await self._pass
        with self._lock:
            self._due.clear()  # a flush tries every user now, backoff or not
            more = bool(self._queued)
        if more:
            self._pass = self._loop.create_task(self._drain())
            await self._pass

    async def _on_worker(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._closed:
            coro.close()
            raise InvalidInputError("the fact layer is closed; open a new LongTermMemory.")
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self._loop))

    # -- distilling -------------------------------------------------------------------------

    async def _catch_up(self, scope: Scope, queued: dict[str, MemoryRecord]) -> None:
        records = dict(queued)
        if scope not in self._seen:  # first time for this user here: what did an earlier process leave?
            marks = await self._erasures(scope)
            every = [rec async for rec in self.backend.scan(scope)]
            records.update((r.id, r) for r in every if not is_fact(r))
            await self._agree(scope, every)  # an erase cut short before its facts followed
            self._agreed[scope] = marks
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
            before = await self._erasures(scope)
            try:
                await self._distill(scope, batch, self.model, self.config, before)
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
                await self._mark(scope, batch)

    def _requeue(self, scope: Scope, records: list[MemoryRecord], before: set[str]) -> None:
        """Queue ``records`` again, but those an erase since the marks ``before`` took away."""
        with self._lock:
            erased = self._erased_since(scope, before)
            self._queued.setdefault(scope, {}).update((r.id, r) for r in records if not erased(r))

    def _erased_since(self, scope: Scope, marks: set[str]) -> Callable[[MemoryRecord], bool]:
        """A predicate: was the record erased by a mark not in ``marks``? (read from the cache the
        last ``_erasures`` call left: marks of this process are there at once)."""
        new = self._marks.get(scope, set()) - marks
        if any(m.startswith("u:") for m in new):
            return lambda r: True
        keys = {m.split(":")[1] for m in new}
        return lambda r: _key(r.session_id) in keys or _key(r.id) in keys

    async def _erasures(self, scope: Scope) -> set[str]:
        marks = await self.ledger.saved(scope, ERASURES)
        self._marks[scope] = self._marks.get(scope, set()) | marks
        return marks

    async def _mark(self, scope: Scope, batch: Iterable[MemoryRecord]) -> None:
        by_session: dict[str, list[str]] = {}
        for r in batch:
            by_session.setdefault(r.session_id, []).append(r.event_id)
        for sid, eids in by_session.items():
            await self.ledger.mark_saved(scope, distilled_session(sid), eids)

    async def _ask(self, model: ChatModel, system: str, task: dict[str, Any]) -> dict[str, Any]:
        return await model.ask(system, task)

    async def _distill(
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
        answer = await self._ask(model, cfg.extract_prompt, {"task": "extract", "events": events})
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
            await self._after_erasures(scope, before)
        await self._mark(scope, batch)  # only now: the facts landed

    async def _after_erasures(self, scope: Scope, before: set[str]) -> None:
        """Facts just written follow the evidence if an erase (any process's) came since the marks
        ``before`` were read or since the facts last agreed. Read after the write: an erase whose
        mark is not here yet deletes its evidence after this write, and its own ``_agree`` then
        sees what this wrote."""
        marks = await self._erasures(scope)
        if marks - before or marks - self._agreed.get(scope, set()):
            await self._agree(scope)
            self._agreed[scope] = marks

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
        answer = await self._ask(model, cfg.reconcile_prompt, task)
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

    # -- reading ----------------------------------------------------------------------------

    async def facts(self, scope: Scope, *, current: bool = True, as_of: float | None = None) -> list[Fact]:
        """The user's facts, oldest first: the current ones, those valid at ``as_of``, or
        (``current=False``) all of them, superseded included."""
        out = []
        async for rec in self.backend.scan(scope):
            fact = Fact.of(rec)
            if fact is None:
                continue
            if as_of is not None:
                if fact.valid_from <= as_of and (fact.valid_until is None or as_of < fact.valid_until):
                    out.append(fact)
            elif fact.current or not current:
                out.append(fact)
        return sorted(out, key=lambda f: (f.valid_from, f.id))

    async def profile(self, scope: Scope) -> str:
        """The current facts as a compact list: the user's own first, then others'."""
        facts = sorted(await self.facts(scope), key=lambda f: (not same_subject(f.subject, "user"), f.valid_from))
        lines, size = [], 0
        for f in facts:
            line = f"- {f.text}"
            if size + len(line) + 1 > self.config.profile_chars:
                continue  # one long fact does not hide the shorter ones after it
            lines.append(line)
            size += len(line) + 1
        return "\n".join(lines)

    async def history(self, scope: Scope, fact_id: str) -> list[dict[str, Any]]:
        """The trail of ``fact_id``: the facts it replaced, itself, and what replaced it, oldest first."""
        every = {f.id: f for f in await self.facts(scope, current=False)}
        return [f.as_dict() for f in trail(every, fact_id)]

    # -- maintenance ------------------------------------------------------------------------

    async def begin_erase(self, scope: Scope, *, session_id: str | None = None, memory_id: str | None = None) -> None:
        """Before evidence of ``session_id`` (or the record ``memory_id``; neither: the whole
        user) is deleted: add an erasure mark to the ledger, so work in flight anywhere follows
        the erase, and drop that evidence from this process's queue. Never waits for a model."""
        await self._on_worker(self._begin_erase(scope, session_id, memory_id))

    async def _begin_erase(self, scope: Scope, session_id: str | None, memory_id: str | None) -> None:
        if session_id is not None or memory_id is not None:  # what the erased words were, for ``_erase``
            words = self._erasing.setdefault(scope, set())
            async for rec in self.backend.scan(scope):
                if rec.id == memory_id or (session_id is not None and rec.session_id == session_id):
                    fact = Fact.of(rec)
                    words.update(_words(rec.text if fact is None else fact.text))
        nonce = uuid.uuid4().hex
        if session_id is not None:
            mark = f"s:{_key(session_id)}:{nonce}"
        elif memory_id is not None:
            mark = f"m:{_key(memory_id)}:{nonce}"
        else:
            mark = f"u::{nonce}"
        await self.ledger.mark_saved(scope, ERASURES, [mark])
        with self._lock:
            self._marks.setdefault(scope, set()).add(mark)
            queued = self._queued.get(scope, {})
            erased = self._erased_since(scope, self._marks[scope] - {mark})
            for rid in [rid for rid, rec in queued.items() if erased(rec)]:
                del queued[rid]

    async def erase(self, scope: Scope) -> int:
        """After evidence was deleted (``begin_erase`` first): the facts follow it (see
        ``_agree``); return how many facts went."""
        return await self._on_worker(self._erase(scope))

    async def _erase(self, scope: Scope) -> int:
        marks = await self._erasures(scope)
        gone = await self._agree(scope, erased=self._erasing.pop(scope, set()))
        self._agreed[scope] = marks
        return gone

    async def _agree(
        self, scope: Scope, records: list[MemoryRecord] | None = None, erased: set[str] | None = None
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
        present = {r.id: r for r in records if not is_fact(r)}
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
        for f in facts.values():
            if f.id in gone:
                continue
            if f.reworded_from is not None and (f.reworded_from in gone or f.reworded_from not in facts):
                f.unword(now)
                changed[f.id] = f
            if f.forget(set(present)):
                changed[f.id] = f
            if f.current:
                continue
            replaced = f.superseded_by is not None and (f.superseded_by in gone or f.superseded_by not in facts)
            retracted = f.superseded_by is None and f.retracted_by and not any(e in present for e in f.retracted_by)
            if replaced or retracted:
                f.reopen("what replaced it was erased" if replaced else "what retracted it was erased", now)
                changed[f.id] = f
        if gone:
            await self.backend.delete(scope, sorted(gone))
        if changed:
            await self.backend.upsert([f.to_record() for f in changed.values()])
        return len(gone)

    async def rebuild(self, scope: Scope, **overrides: Any) -> dict[str, int]:
        """Replace the user's facts with facts distilled afresh from all evidence, oldest first;
        ``overrides`` change the config for this run (another ``model``, ``base_url``, prompt).
        The new facts are made in memory: until all of it worked, the old ones stay."""
        return await self._on_worker(self._rebuild(scope, overrides))

    async def _rebuild(self, scope: Scope, overrides: dict[str, Any]) -> dict[str, int]:
        if self._busy is None:
            self._busy = asyncio.Lock()
        cfg = self.config.model_copy(update=overrides) if overrides else self.config
        model = ChatModel(cfg) if overrides else self.model
        async with self._busy:
            try:
                before = await self._erasures(scope)
                old: list[MemoryRecord] = []
                evidence: list[MemoryRecord] = []
                async for rec in self.backend.scan(scope):
                    (old if is_fact(rec) else evidence).append(rec)
                evidence.sort(key=lambda r: (r.timestamp, r.id))
                staged: dict[str, Fact] = {}
                for i in range(0, len(evidence), cfg.batch_events):
                    await self._distill(scope, evidence[i : i + cfg.batch_events], model, cfg, before, staged)
                if staged:  # the new facts first: a rebuild cut short leaves old and new, never nothing
                    await self.backend.upsert([f.to_record() for f in staged.values()])
                stale = [r.id for r in old if r.id not in staged]
                if stale:
                    await self.backend.delete(scope, stale)
                await self._after_erasures(scope, before)
                await self._mark(scope, evidence)
                self._seen.add(scope)
            finally:
                if model is not self.model:
                    await model.aclose()
        return {"before": len(old), "after": len(await self.facts(scope, current=False)), "events": len(evidence)}

    async def consolidate(self, scope: Scope) -> dict[str, int]:
        """Merge duplicates and resolve contradictions among the user's current facts: the model
        names pairs (keep, drop); the dropped fact is superseded by the kept one, which takes its
        evidence. Same-text duplicates merge without asking. Returns current facts before and after."""
        return await self._on_worker(self._consolidate(scope))

    async def _consolidate(self, scope: Scope) -> dict[str, int]:
        if self._busy is None:
            self._busy = asyncio.Lock()
        async with self._busy:
            marks = await self._erasures(scope)
            facts = await self.facts(scope)
            before, now = len(facts), time.time()
            merges: list[tuple[Fact, Fact]] = []
            firsts: dict[tuple[str, str], Fact] = {}
            for f in facts:
                key = (normal(f.subject), normal(f.text))
                if key in firsts:
                    merges.append((firsts[key], f))
                else:
                    firsts[key] = f
            dropped = {d.id for _, d in merges}
            kept = {k.id for k, _ in merges}
            rest = [f for f in facts if f.id not in dropped]
            if len(rest) > 1:
                refs = {f"f{i}": f for i, f in enumerate(rest, 1)}
                task = {"task": "consolidate", "facts": listing(refs)}
                answer = await self._ask(self.model, self.config.consolidate_prompt, task)
                merges_said = answer.get("merges")
                for m in merges_said if isinstance(merges_said, list) else []:
                    keep = refs.get(str(m.get("keep"))) if isinstance(m, dict) else None
                    drop = refs.get(str(m.get("drop"))) if isinstance(m, dict) else None
                    if keep is None or drop is None or keep is drop:
                        continue  # a ref we never gave
                    if drop.id in dropped or drop.id in kept or keep.id in dropped:
                        continue  # said twice, or a chain or cycle: every group keeps one current fact
                    if same_subject(keep.subject, drop.subject):  # never merge two people's facts
                        merges.append((keep, drop))
                        dropped.add(drop.id)
                        kept.add(keep.id)
            changed: dict[str, Fact] = {}
            for keep, drop in merges:
                keep = changed.get(keep.id, keep)
                keep.evidence += [e for e in drop.evidence if e not in keep.evidence]
                keep.sessions += [s for s in drop.sessions if s not in keep.sessions]
                keep.note({"op": "merged", "at": iso_now(), "from": drop.id})
                drop.supersede(now, keep.id, [], "merged")
                changed[keep.id], changed[drop.id] = keep, drop
            if changed:
                await self.backend.upsert([f.to_record() for f in changed.values()])
                await self._after_erasures(scope, marks)
        return {"before": before, "after": before - len(dropped)}

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True

        async def stop() -> None:
            if self._retry is not None:
                self._retry.cancel()
            if self._pass is not None and not self._pass.done():
                self._pass.cancel()  # what it did not mark stays in the ledger's debt: the next process does it
                await asyncio.wait([self._pass], timeout=5)
            await self.model.aclose()

        try:
            await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(stop(), self._loop))
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)
            if not self._thread.is_alive():
                self._loop.close()


def listing(refs: dict[str, Fact]) -> list[dict[str, Any]]:
    """Facts as the model sees them: a short ref (never our ids), subject, text, since when."""
    return [{"ref": k, "subject": f.subject, "text": f.text, "since": iso(f.valid_from)} for k, f in refs.items()]


def same_subject(a: str, b: str) -> bool:
    return normal(a) == normal(b)


def iso_now() -> str:
    return iso(time.time()) or ""


def said_text(value: Any) -> str:
    """A string from a model's answer as we keep it: repaired Unicode (a model cuts emoji in
    half too), trimmed, at most ``MAX_FACT_CHARS``; "" for anything that is no text."""
    if not isinstance(value, str):
        return ""
    return repair_unicode(value).replace("\x00", "").strip()[:MAX_FACT_CHARS].strip()


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


def _key(value: str) -> str:
    """A short, colon-free digest of an id, as erasure marks hold it."""
    return hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:32]
