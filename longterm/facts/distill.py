"""Distilling: a user's saved evidence turned into facts, batch by batch, exactly once.

The seam: ``Distiller(backend, ledger, erasures, requeue, config, model)``.
``catch_up(scope, records)`` is the worker's work: it distils what of ``records`` (and, the
first time this process works for the user, of all the user's records) the ledger has not
seen distilled, and hands what it did not do to ``requeue``. ``distill(scope, batch, ...)``
turns one batch into facts (a rebuild calls it with its own model and ``staged`` facts), and
``mark`` notes a batch distilled. Everything goes through the backend contract (``upsert``,
``search``, ``scan``) and the store's own ledger: no engine knows facts exist.

How a batch of evidence becomes facts:
1. **extract and decide, in one call** (``combined``, the default): the request shows up to
   ``batch_events`` events and the user's current facts they may touch (``Decisions.held``);
   the model proposes facts, each naming its subject, the events it came from and what it
   does to the held facts (ADD, UPDATE, DELETE or NOOP on a ref). The two-step form
   (``combined=False``) asks for the facts alone, then reconciles each with its own call;
2. **settle** each proposal (``decide``): the same text is a NOOP without asking, the model's
   decision is applied under the guards (a fact about another subject is never superseded;
   an older statement never supersedes a newer fact), and a proposal the answer gave no
   decision for is reconciled the two-step way;
3. **write, then mark**: the batch's new and changed facts are written in one upsert, they
   follow any erase that came meanwhile (``Erasures.after_write``), and only then are its
   events marked in the ledger under ``distilled_session(session_id)``. A failure before that
   leaves them unmarked and the whole batch is tried again later; fact ids are derived from
   text and first evidence, so a retry rewrites what it wrote.

Why one call: a batch cost one extraction plus one reconcile call per proposed fact that
resembled a held one, each resending a system prompt of about 210 tokens; one call that sees
the held facts costs less than half (``bench/facts_cost.py``) for the same facts.

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
from ..records import MemoryRecord, Scope
from .decide import Decisions, event_lines, said_text
from .erasure import Erasures
from .llm import ChatModel, FactsConfig, ModelError
from .model import Fact, distilled_session, is_fact

log = logging.getLogger(__name__)

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
        # The marks known when these records were taken (nothing awaited since): an erase whose
        # mark came later is one a batch must follow after its write, even if the batch's own
        # read of the marks (``before``) already sees it; its evidence may be in ``queued``.
        known = self.erasures.known(scope)
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
            marks = await self.erasures.read(scope)
            try:
                await self.distill(scope, batch, self.model, self.config, marks & known)
                self._strikes.pop(batch[0].id, None)
            except (ModelError, BackendUnavailableError, asyncio.CancelledError):
                self._requeue(scope, todo[i:], marks)  # the model's answer or an outage: retried, never skipped
                raise
            except Exception as exc:
                strikes = self._strikes[batch[0].id] = self._strikes.get(batch[0].id, 0) + 1
                if strikes < POISON_STRIKES:
                    self._requeue(scope, todo[i:], marks)
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
        """Extract facts from ``batch`` and settle each; write what changed in one upsert;
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
        # this batch's facts, new or changed: seen by its later proposals (a rebuild's: all so far)
        decide = Decisions(self.backend, scope, model, cfg, {} if staged is None else staged, staged is None)
        if cfg.one_call:
            task: dict[str, Any] = {"task": "extract", "events": event_lines(refs), "facts": await decide.held(batch)}
        else:
            events = [{"id": k, "role": r.role, "time": r.iso_timestamp(), "text": r.text} for k, r in refs.items()]
            task = {"task": "extract", "events": events}
        answer = await model.ask(cfg.distil_prompt if cfg.one_call else cfg.extract_prompt, task)
        proposals = answer.get("facts")
        if not isinstance(proposals, list):
            raise ModelError(f"the fact model's extraction has no 'facts' list: {str(answer)[:200]!r}")
        for i, p in enumerate(proposals, 1):
            text = said_text(p.get("text")) if isinstance(p, dict) else ""
            if not text:
                continue  # one unusable proposal does not cost the others
            cited = p.get("evidence")
            evidence = [refs[e] for e in cited if isinstance(e, str) and e in refs] if isinstance(cited, list) else []
            subject = said_text(p.get("subject")) or "user"
            await decide.settle(f"n{i}", subject, text, evidence or batch, p if cfg.one_call else None)
        if staged is not None:
            return
        if decide.changed:
            await self.backend.upsert([f.to_record() for f in decide.changed.values()])
            await self.erasures.after_write(scope, before)
        await self.mark(scope, batch)  # only now: the facts landed
