"""The fact layer: facts distilled from saved evidence, kept current, with history.

The seam: ``LongTermMemory(facts={"base_url": ..., "model": ...})`` (or the
``LONGTERM_FACTS_*`` variables) turns it on; then the memory's ``get_user_profile``,
``list_facts``, ``fact_history``, ``consolidate_facts``, ``rebuild_facts`` and
``search_memory(kind=...)`` read and keep it. ``FactLayer`` (``layer``) is the machinery,
composing the background thread and queue (``worker``), distilling (``distill``: one model
call a batch, whose decisions ``decide`` applies), erasure marks (``erasure``), reads
(``reading``) and consolidate/rebuild (``maintenance``); ``Fact``
(``model``) is a fact as a record, ``ChatModel``/``FactsConfig`` (``llm``) the model.
Guide: ``docs/facts.md``.
"""

from __future__ import annotations

from .layer import FactLayer
from .llm import ChatModel, FactsConfig, ModelError
from .model import FACTS_SESSION, KINDS, Fact, SearchKind, distilled_session, is_fact, split_hits

__all__ = [
    "FACTS_SESSION",
    "KINDS",
    "ChatModel",
    "Fact",
    "FactLayer",
    "FactsConfig",
    "ModelError",
    "SearchKind",
    "distilled_session",
    "is_fact",
    "split_hits",
]
