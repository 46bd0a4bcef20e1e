"""Maintenance: a user's facts consolidated, or rebuilt afresh from all the evidence.

The seam: ``Maintenance(backend, config, model, erasures, distiller)``; ``consolidate(scope)``
and ``rebuild(scope, overrides)``, each run on the worker's loop while no batch runs (the
fact layer sees to that), each returning counts for people.

Why here and not in the distiller: both rewrite a user's facts as a whole. A consolidation
merges duplicates and resolves contradictions among the current facts (one model call); a
rebuild distils every event again (with another model or prompt if asked) into memory and
replaces the old facts only once all of it worked. Both follow any erase that came while
they ran (``Erasures.after_write``).
"""

from __future__ import annotations

import time
from typing import Any

from ..core.backend import Backend
from ..records import MemoryRecord, Scope
from .decide import listing
from .distill import Distiller
from .erasure import Erasures
from .llm import ChatModel, FactsConfig
from .model import Fact, is_fact, iso, normal, same_subject
from .reading import facts


class Maintenance:
    def __init__(
        self, backend: Backend, config: FactsConfig, model: ChatModel, erasures: Erasures, distiller: Distiller
    ) -> None:
        self.backend = backend
        self.config = config
        self.model = model
        self.erasures = erasures
        self.distiller = distiller

    async def rebuild(self, scope: Scope, overrides: dict[str, Any]) -> dict[str, int]:
        """Replace the user's facts with facts distilled afresh from all evidence, oldest first;
        ``overrides`` change the config for this run (another ``model``, ``base_url``, prompt).
        The new facts are made in memory: until all of it worked, the old ones stay."""
        cfg = self.config.model_copy(update=overrides) if overrides else self.config
        model = ChatModel(cfg) if overrides else self.model
        try:
            before = await self.erasures.read(scope)
            old: list[MemoryRecord] = []
            evidence: list[MemoryRecord] = []
            async for rec in self.backend.scan(scope):
                (old if is_fact(rec) else evidence).append(rec)
            evidence.sort(key=lambda r: (r.timestamp, r.id))
            staged: dict[str, Fact] = {}
            for i in range(0, len(evidence), cfg.batch_events):
                await self.distiller.distill(scope, evidence[i : i + cfg.batch_events], model, cfg, before, staged)
            if staged:  # the new facts first: a rebuild cut short leaves old and new, never nothing
                await self.backend.upsert([f.to_record() for f in staged.values()])
            stale = [r.id for r in old if r.id not in staged]
            if stale:
                await self.backend.delete(scope, stale)
            await self.erasures.after_write(scope, before)
            await self.distiller.mark(scope, evidence)
            self.distiller.scanned(scope)
        finally:
            if model is not self.model:
                await model.aclose()
        after = len(await facts(self.backend, scope, current=False))
        return {"before": len(old), "after": after, "events": len(evidence)}

    async def consolidate(self, scope: Scope) -> dict[str, int]:
        """Merge duplicates and resolve contradictions among the user's current facts: the model
        names pairs (keep, drop); the dropped fact is superseded by the kept one, which takes its
        evidence. Same-text duplicates merge without asking. Returns current facts before and after."""
        marks = await self.erasures.read(scope)
        current = await facts(self.backend, scope)
        now = time.time()
        merges = _same_text(current)
        dropped = {d.id for _, d in merges}
        rest = [f for f in current if f.id not in dropped]
        if len(rest) > 1:
            refs = {f"f{i}": f for i, f in enumerate(rest, 1)}
            answer = await self.model.ask(
                self.config.consolidate_prompt, {"task": "consolidate", "facts": listing(refs)}
            )
            merges += _merges_said(answer.get("merges"), refs, merges)
        changed = _merge(merges, now)
        if changed:
            await self.backend.upsert([f.to_record() for f in changed.values()])
            await self.erasures.after_write(scope, marks)
        return {"before": len(current), "after": len(current) - len({d.id for _, d in merges})}


def _same_text(current: list[Fact]) -> list[tuple[Fact, Fact]]:
    """(keep, drop) for every fact that says what an older one about the same subject says."""
    merges: list[tuple[Fact, Fact]] = []
    firsts: dict[tuple[str, str], Fact] = {}
    for f in current:
        key = (normal(f.subject), normal(f.text))
        if key in firsts:
            merges.append((firsts[key], f))
        else:
            firsts[key] = f
    return merges


def _merges_said(said: object, refs: dict[str, Fact], merges: list[tuple[Fact, Fact]]) -> list[tuple[Fact, Fact]]:
    """The model's (keep, drop) pairs we can use besides ``merges``: refs we gave, each fact in
    one pair at most (no chain, no cycle: every group keeps one current fact), one subject."""
    dropped = {d.id for _, d in merges}
    kept = {k.id for k, _ in merges}
    more: list[tuple[Fact, Fact]] = []
    for m in said if isinstance(said, list) else []:
        keep = refs.get(str(m.get("keep"))) if isinstance(m, dict) else None
        drop = refs.get(str(m.get("drop"))) if isinstance(m, dict) else None
        if keep is None or drop is None or keep is drop:
            continue  # a ref we never gave
        if drop.id in dropped or drop.id in kept or keep.id in dropped:
            continue  # said twice, or a chain or cycle: every group keeps one current fact
        if same_subject(keep.subject, drop.subject):  # never merge two people's facts
            more.append((keep, drop))
            dropped.add(drop.id)
            kept.add(keep.id)
    return more


def _merge(merges: list[tuple[Fact, Fact]], now: float) -> dict[str, Fact]:
    """Each dropped fact superseded by its kept one, which takes its evidence; the facts changed."""
    changed: dict[str, Fact] = {}
    for keep, drop in merges:
        keep = changed.get(keep.id, keep)
        keep.evidence += [e for e in drop.evidence if e not in keep.evidence]
        keep.sessions += [s for s in drop.sessions if s not in keep.sessions]
        keep.note({"op": "merged", "at": iso(time.time()) or "", "from": drop.id})
        drop.supersede(now, keep.id, [], "merged")
        changed[keep.id], changed[drop.id] = keep, drop
    return changed
