"""Capability flags: what an engine declares it can do, read in this one place.

The seam: an engine declares its flags as class attributes (``Engine.atomic_save`` and the
others; kombu's ``Transport.implements`` is the model), and ``capabilities(backend)`` reads
them, for the engine core and the facade alike. A backend that is not an ``Engine`` may
declare them the same way; one that declares none can do none of it.

Why flags and not a comparison of methods: overriding a method says nothing about what an
engine promises (a wrapper around the default still overrides it), and two defaults that
called each other by such a comparison could recurse; a declared flag is what it says.
"""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(frozen=True)
class Capabilities:
    """What a backend declares it can do (each field a class attribute of the same name)."""

    atomic_save: bool = False
    """A save writes its records and its ledger marks in one step (the engine's ``_commit``);
    otherwise the core writes the records, then the marks, and ``longterm doctor`` checks them."""
    keeps_ledger: bool = False
    """The engine keeps its ledger and meta in its own store (``_ledger_saved``, ``_ledger_mark``,
    ``_meta_get``, ``_meta_set``); otherwise in ``side_ledger``, a file beside it."""
    embeds_later: bool = False
    """The engine lists what it holds without vectors (``_unembedded``, ``_list_unembedded``), lists what
    it writes so (``_embed_pending``) and takes vectors later (``_write_vectors``): ``embed_later=True``
    works on it, a save without the store's embedder leaves its vectors pending, ``reembed`` fills them."""
    embeds_itself: bool = False
    """The engine embeds with an embedder of its own (``_own_embedder``; mem0: its embedding model) and
    checks the store's embedder id itself; the core's embedder stays None, and the core checks that
    embedder's dimension against the store's before a write, but never loads one for it."""
    native_hybrid: bool = False
    """The engine fuses full text and vectors itself (``_search``); otherwise the core fuses them."""
    purges: bool = False
    """An erase leaves bytes in the engine's files that ``_purge`` compacts."""
    marks_erasures: bool = False
    """An erase of a scope or a session is not one step: it marks its intent first, every read
    hides what the mark covers, and a crashed erase is finished later (``core.erasures``)."""
    filters_exact: bool = False
    """The engine applies a whole filter itself (``where.filter``, not only its ``native`` tree), so
    what it returns needs no second look; otherwise the core checks ``Where.admits`` and reads deeper."""
    rewrites_alive: bool = False
    """The engine writes a record over only where the store still holds it alive (``_rewrite``: one
    step per record, keeping the record's save stamp, so an erase under way still covers it): an
    update racing an erase never brings the memory back. Otherwise an update is an upsert."""


FLAGS = tuple(f.name for f in fields(Capabilities))


def capabilities(backend: object) -> Capabilities:
    """The flags ``backend``'s class declares (a flag it does not declare is False)."""
    cls = type(backend)
    return Capabilities(**{flag: bool(getattr(cls, flag, False)) for flag in FLAGS})
