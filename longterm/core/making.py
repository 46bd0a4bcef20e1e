"""Making a store's directory whole or not at all: built aside, then moved into place.

The seam: ``made_whole(target, build)`` runs ``build(place)`` on a new private directory
beside ``target`` (``.<name>.making-<pid>-<random>``) and renames it to ``target`` only when
``build`` returned: a process killed at any point of the making leaves ``target`` as it was
(absent) and a directory that ``clear_leftovers(target)`` removes on the next open. A store
engine calls both with the store's lock held, so no other process is making it meanwhile.
``replaced_whole(target, build)`` swaps a rebuilt directory in for an existing one the same way
(two renames; ``clear_leftovers`` finishes or undoes one killed between them). ``step(name)`` is
called between the steps (a no-op): the seam a fault test replaces to kill the process exactly
there (``tests/faults/test_crash_create.py``).

Why: an engine that makes a store in several calls (qdrant-edge writes its write-ahead log,
then its config, then each payload index) left, when killed between them, a directory that
every later open refused ("edge config is not provided and no segments were loaded") with
nothing to say what to do. A rename within one directory is atomic: the store is there
whole, or not there.
"""

from __future__ import annotations

import logging
import os
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path

from ..config import private_dir

log = logging.getLogger(__name__)

#: What a directory being made is named beside its target: ``.<target name>`` then this.
MAKING = ".making-"
#: What a replaced directory is named beside its target while its replacement moves in.
REPLACED = ".replaced"


def step(name: str) -> None:
    """Between the steps of making a store (``name`` says which): nothing. Fault tests replace it."""


def clear_leftovers(target: Path) -> None:
    """Remove what a making of ``target`` killed part-way left beside it, and finish a replacement
    (``replaced_whole``) killed between its two renames: the old directory back when the new one
    never arrived, removed when it did (call with the store's lock held)."""
    parent = target.parent
    if not parent.is_dir():
        return
    old = parent / f".{target.name}{REPLACED}"
    if old.exists():
        if target.exists():
            shutil.rmtree(old, ignore_errors=True)
        else:
            log.warning("%s: put back, a process stopped while replacing it", target)
            os.rename(old, target)
    for leftover in parent.glob(f".{target.name}{MAKING}*"):
        log.warning("%s: removing %s, left by a process that stopped while making the store", target, leftover)
        shutil.rmtree(leftover, ignore_errors=True)


def made_whole(target: Path, build: Callable[[Path], None]) -> None:
    """``build(place)`` on a new directory beside ``target``, then ``place`` renamed to ``target``:
    ``target`` appears whole or not at all. ``build`` must leave nothing open in ``place``."""
    private_dir(target.parent)
    place = target.parent / f".{target.name}{MAKING}{os.getpid()}-{uuid.uuid4().hex[:8]}"
    private_dir(place)
    try:
        build(place)
        step("built")
        _sync_dir(place)
        os.rename(place, target)
        _sync_dir(target.parent)
    except BaseException:
        shutil.rmtree(place, ignore_errors=True)
        raise
    step("moved")


def replaced_whole(target: Path, build: Callable[[Path], None], release: Callable[[], None]) -> None:
    """``build(place)`` beside the existing directory ``target``, then ``release()`` (close what holds
    the old one) and the new one swapped in: ``target`` moved to ``.<name>.replaced``, ``place``
    renamed to ``target``, the old one removed. Killed at any point, ``clear_leftovers`` leaves the
    old directory or the new one whole in place."""
    old = target.parent / f".{target.name}{REPLACED}"
    place = target.parent / f".{target.name}{MAKING}{os.getpid()}-{uuid.uuid4().hex[:8]}"
    private_dir(place)
    try:
        build(place)
        _sync_dir(place)
    except BaseException:
        shutil.rmtree(place, ignore_errors=True)
        raise
    step("replacement built")
    release()
    os.rename(target, old)
    step("replaced moved aside")
    os.rename(place, target)
    _sync_dir(target.parent)
    step("replacement moved")
    shutil.rmtree(old, ignore_errors=True)


def _sync_dir(path: Path) -> None:
    """``fsync`` a directory (its entries), where the platform allows it."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
