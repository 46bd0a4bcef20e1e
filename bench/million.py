"""The local backend at a million records with realistic questions, next to raw SQLite FTS5.

    python bench/million.py [--size 1000000] [--questions 300] [--keep DIR | --reuse DIR] [--tree PATH]

Builds one store through the public API (``add_session_to_memory``, sessions of 50 user
events, 100 users) and one raw SQLite FTS5 file (ingest_search.py's), interleaved session by
session, from English-like chat (``_data.chat_texts``: function words everywhere, "work" in
~1% of messages, a Zipf tail of made-up words), dated over the year before the build. Prints
the save rate of each (whole build and its last tenth) and bytes per record. Then asks a
question mix, interleaved ours/raw, round-robin over the users, every question dated at the
build's end (``now=``, so "today" means the same on a reused store): (a) frequent words in
natural English ("what did I say about work today"), (b) rare words, (c) mid-frequency
words, (d) long inputs (a 100 KB paste, 1,000 distinct words, a 16 KB paste). Prints p50,
p99 and max per class and over (a)-(c) against the issue's goals (2 / 10 / 50 ms), the max
over every query (long inputs too) against the 50 ms any query must keep, and how frequent
each class's words are in the store (the share of messages holding the question's most
frequent term). 30 warm-up questions first are not counted. Asserts nothing.

``--keep DIR`` builds into DIR and keeps both files; ``--reuse DIR`` skips the build and only
searches (ours is opened read-write through LongTermMemory: a newer library may upgrade it).
``--tree PATH`` also asks every question of a copy of the store, made before either opens it,
through the ``longterm`` of another checkout (PYTHONPATH=PATH, a process of its own that
times its own searches), interleaved with the other two: a baseline from the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from statistics import median
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import USERS, pct
from _data import chat_texts, long_inputs, questions
from ingest_search import RAW_SCHEMA, RAW_SEARCH, raw_query, save_both
from rich.console import Console
from rich.table import Table

import longterm
from longterm import BackendUnavailableError, LongTermMemory
from longterm.retrieval.text import query_terms

PER_SESSION = 50
CHUNK = 50_000  # records generated at a time
YEAR = 365 * 86_400
GOALS = {"p50": 2.0, "p99": 10.0, "max": 50.0}
WARMUP = 30
COLUMNS = "class,asked,top term in % of msgs,system,p50 ms,p99 ms,max ms,p50 / raw,max / raw,hits/q,goals"

#: The other checkout's searcher: opens the store, answers {"user", "q", "now"} lines with the
#: seconds each search took, measured in its own process, and its number of hits.
WORKER = """
import asyncio, json, sys, time
t = time.perf_counter()
import longterm
from longterm import LongTermMemory

async def main():
    memory = LongTermMemory(backend="local", backend_config={"path": sys.argv[1]})
    for _ in range(120):  # an upgrade of the store on open may outlast a search's deadline
        try:
            await memory.search_memory(app_name="bench", user_id="user-0", query="hello", now=0)
            break
        except longterm.BackendUnavailableError:
            pass
    print(json.dumps({"ready": longterm.__file__, "open_s": time.perf_counter() - t}), flush=True)
    for line in sys.stdin:
        ask = json.loads(line)
        t0 = time.perf_counter()
        got = await memory.search_memory(app_name="bench", user_id=ask["user"], query=ask["q"], now=ask["now"])
        print(json.dumps({"s": time.perf_counter() - t0, "hits": len(got.memories)}), flush=True)
    await memory.close()

asyncio.run(main())
"""


def chat_sessions(size: int, end: float):
    """Sessions of 50 user events, round-robin over the users, spread over the year before ``end``."""
    n_sessions = -(-size // PER_SESSION)
    for chunk_start in range(0, size, CHUNK):
        chunk = chat_texts(min(CHUNK, size - chunk_start), seed=1_000 + chunk_start // CHUNK)
        for at in range(0, len(chunk), PER_SESSION):
            s = (chunk_start + at) // PER_SESSION
            begins = end - YEAR + s * YEAR / n_sessions
            yield {
                "id": f"s{s}",
                "app_name": "bench",
                "user_id": f"user-{s % USERS}",
                "events": [
                    {
                        "id": f"s{s}-e{i}",
                        "author": "user",
                        "timestamp": begins + 60 * i,
                        "content": {"role": "user", "parts": [{"text": t}]},
                    }
                    for i, t in enumerate(chunk[at : at + PER_SESSION])
                ],
            }


def on_disk(path: Path) -> int:
    """The file's size once its write-ahead log is folded in (what a closed store takes)."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


async def build(where: Path, size: int, console: Console) -> dict[str, Any]:
    end = time.time()
    raw = sqlite3.connect(where / "raw.db", isolation_level=None)
    raw.executescript(RAW_SCHEMA)
    memory = LongTermMemory(backend="local", backend_config={"path": str(where / "ours.db")})
    took = {"raw": 0.0, "ours": 0.0}
    tenth: dict[str, float] = {}
    done, wall, report = 0, time.perf_counter(), size // 10
    for s in chat_sessions(size, end):
        if not tenth and done >= size - size // 10:
            tenth = dict(took)
        await save_both(raw, memory, s, took)
        done += len(s["events"])
        if done >= report:
            rate = {who: done / took[who] for who in took}
            console.print(
                f"{done:,} records: ours {rate['ours']:,.0f}/s, raw {rate['raw']:,.0f}/s "
                f"({rate['ours'] / rate['raw']:.2f}x), {time.perf_counter() - wall:,.0f} s"
            )
            report += size // 10
    raw.close()
    await memory.close()
    last = size - size // 10
    meta = {
        "records": size,
        "users": USERS,
        "per_session": PER_SESSION,
        "end": end,
        "built": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "build_wall_s": time.perf_counter() - wall,
        "saves_per_s": {who: size / took[who] for who in took},
        "last_tenth_saves_per_s": {who: (size - last) / (took[who] - tenth.get(who, 0.0)) for who in took},
    }
    (where / "million.json").write_text(json.dumps(meta, indent=1))
    return meta


def saves_table(meta: dict[str, Any], size_bytes: dict[str, int]) -> Table:
    n = meta["records"]
    table = Table(
        title=f"saves: {n:,} records, {meta['users']} users, sessions of {meta['per_session']} (built {meta['built']})"
    )
    for col in ("system", "saves/s", "ratio", "last tenth saves/s", "ratio", "B/rec"):
        table.add_column(col, justify="right")
    rate, last = meta["saves_per_s"], meta["last_tenth_saves_per_s"]
    for who, label in (("raw", "raw sqlite3+FTS5"), ("ours", "longterm local")):
        table.add_row(
            label,
            f"{rate[who]:,.0f}",
            f"{rate[who] / rate['raw']:.2f}",
            f"{last[who]:,.0f}",
            f"{last[who] / last['raw']:.2f}",
            f"{size_bytes[who] / n:,.0f}",
        )
    return table


def question_mix(n: int, repeats: int) -> list[tuple[str, str]]:
    """(class, question): ``n`` of each of (a)-(c), each long input ``repeats`` times, shuffled."""
    qs = questions(n)
    items = [(f"{key} {name}", q) for key, name in (("a", "frequent"), ("b", "rare"), ("c", "mid")) for q in qs[name]]
    items += [(f"d {label}", q) for label, q in long_inputs().items() for _ in range(repeats)]
    return [items[i] for i in np.random.default_rng(5).permutation(len(items)).tolist()]


class Baseline:
    """The other checkout's searcher (``WORKER``) on its own copy of the store."""

    def __init__(self, tree: Path, store: Path) -> None:
        env = dict(os.environ, PYTHONPATH=str(tree))
        self.proc = subprocess.Popen(
            [sys.executable, "-c", WORKER, str(store)],
            cwd=tree,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.ready = self._read()

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"the --tree searcher ended (exit {self.proc.wait()}); its error is above")
        return json.loads(line)

    def ask(self, user: str, q: str, now: float) -> tuple[float, int]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"user": user, "q": q, "now": now}) + "\n")
        self.proc.stdin.flush()
        answer = self._read()
        return float(answer["s"]), int(answer["hits"])

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=120)


def top_term_share(raw: sqlite3.Connection, q: str, records: int) -> float:
    """The share of messages (%) holding the question's most frequent looked-up term."""
    docs = [
        raw.execute("SELECT doc FROM temp.vocab WHERE term = ?", (t,)).fetchone() for t in query_terms(q, stem=False)
    ]
    return 100 * max((d[0] for d in docs if d), default=0) / records


async def first_question(memory: LongTermMemory, end: float, console: Console) -> None:
    """The first search, retried: an upgrade of the store on open may outlast its deadline."""
    t = time.perf_counter()
    for attempt in range(1, 121):
        try:
            await memory.search_memory(app_name="bench", user_id="user-0", query="hello", now=end)
            break
        except BackendUnavailableError as e:
            console.print(f"ours: first question, try {attempt}: {e}")
    console.print(f"ours ({longterm.__file__}): opened and first question in {time.perf_counter() - t:.2f} s")


async def search(where: Path, meta: dict[str, Any], args: argparse.Namespace, console: Console) -> Table:
    scratch = Path(tempfile.mkdtemp(prefix="million-base-", dir=where)) if args.tree else None
    base = raw = memory = None
    try:
        if scratch is not None:
            shutil.copy2(where / "ours.db", scratch / "ours.db")  # its mode too (0600)
            base = Baseline(Path(args.tree).resolve(), scratch / "ours.db")
            console.print(f"baseline: {base.ready['ready']}, opened in {base.ready['open_s']:.2f} s")
        raw = sqlite3.connect(where / "raw.db", isolation_level=None)
        raw.execute("CREATE VIRTUAL TABLE temp.vocab USING fts5vocab(main, f, row)")
        seen = ", ".join(
            f'"{w}" {top_term_share(raw, w, meta["records"]):.2f}%' for w in ("the", "know", "work", "sister")
        )
        console.print(f"data: messages holding {seen}")
        memory = LongTermMemory(backend="local", backend_config={"path": str(where / "ours.db")})
        await first_question(memory, meta["end"], console)
        return await ask_all(raw, memory, base, meta, args, console)
    finally:
        if raw is not None:
            raw.close()
        if memory is not None:
            await memory.close()
        if base is not None:
            base.close()
        if scratch is not None:
            shutil.rmtree(scratch)


async def ask_all(
    raw: sqlite3.Connection,
    memory: LongTermMemory,
    base: Baseline | None,
    meta: dict[str, Any],
    args: argparse.Namespace,
    console: Console,
) -> Table:
    """Warm-up, then the question mix, each question on every system in turn (the order rotates)."""
    end, records = meta["end"], meta["records"]
    systems = ["raw", "ours"] + (["base"] if base is not None else [])

    async def ask(who: str, user: str, q: str) -> tuple[float, int]:
        """Seconds and hits: a fast answer that found nothing shows as such."""
        t = time.perf_counter()
        if who == "raw":
            n = len(raw.execute(RAW_SEARCH, (raw_query(q), user)).fetchall())
        elif who == "ours":
            n = len((await memory.search_memory(app_name="bench", user_id=user, query=q, now=end)).memories)
        else:
            assert base is not None
            return base.ask(user, q, end)
        return time.perf_counter() - t, n

    warm = [q for qs in questions(WARMUP // 3, seed=99).values() for q in qs]
    for i, q in enumerate(warm):
        for who in systems:
            await ask(who, f"user-{i % USERS}", q)
    items = question_mix(args.questions, args.long_repeats)
    lat: dict[str, dict[str, list[float]]] = {}
    hits: dict[str, dict[str, list[int]]] = {}
    for i, (cls, q) in enumerate(items):
        user = f"user-{i % USERS}"
        for k in range(len(systems)):
            who = systems[(i + k) % len(systems)]
            seconds, n = await ask(who, user, q)
            lat.setdefault(cls, {}).setdefault(who, []).append(seconds)
            hits.setdefault(cls, {}).setdefault(who, []).append(n)
    shares = {cls: median(top_term_share(raw, q, records) for c, q in items if c == cls) for cls in lat}
    if base is not None:
        empty = sum(b == 0 < o for by in hits.values() for o, b in zip(by["ours"], by["base"], strict=True))
        if empty:
            console.print(
                f"[bold red]the --tree searcher found nothing on {empty} questions ours answered: it may not "
                "read this store (built by a newer version?); build with the older tree and --reuse, or compare "
                "only where hits/q agree[/]"
            )
    return latency_table(records, lat, hits, shares, systems)


def latency_table(
    records: int,
    lat: dict[str, dict[str, list[float]]],
    hits: dict[str, dict[str, list[int]]],
    shares: dict[str, float],
    systems: list[str],
) -> Table:
    goals = " / ".join(f"{k} {v:g}" for k, v in GOALS.items())
    table = Table(title=f"search at {records:,} records, top 5, interleaved; goals for ours: {goals} ms")
    for col in COLUMNS.split(","):
        table.add_column(col, justify="right")
    classes = sorted(lat)
    groups = {"overall a-c": [c for c in classes if not c.startswith("d ")], "any query a-d": classes}
    for name, members in groups.items():
        lat[name] = {who: [x for c in members for x in lat[c][who]] for who in systems}
        hits[name] = {who: [x for c in members for x in hits[c][who]] for who in systems}
    labels = {"raw": "raw sqlite3+FTS5", "ours": "longterm local", "base": "longterm --tree"}
    # Long inputs are ~2% of the mix, enough to be the p99 of all: (a)-(c) are judged on
    # p50/p99/max, everything (long inputs too) on max only ("ANY query <= 50 ms").
    for cls in [*classes, *groups]:
        by = lat[cls]
        share = f"{shares[cls]:.3f}" if cls in shares else ""
        for k, who in enumerate(systems):
            p = {"p50": pct(by[who], 0.5), "p99": pct(by[who], 0.99), "max": pct(by[who], 1.0)}
            checked = ("max",) if cls.startswith(("d ", "any")) else tuple(GOALS)
            met = " ".join(f"{g} {'ok' if p[g] <= GOALS[g] else 'MISS'}" for g in checked) if who != "raw" else ""
            table.add_row(
                cls if k == 0 else "",
                f"{len(by[who])}" if k == 0 else "",
                share if k == 0 else "",
                labels[who],
                f"{p['p50']:.2f}",
                f"{p['p99']:.2f}",
                f"{p['max']:.2f}",
                f"{p['p50'] / pct(by['raw'], 0.5):.2f}",
                f"{p['max'] / pct(by['raw'], 1.0):.2f}",
                f"{sum(hits[cls][who]) / len(hits[cls][who]):.1f}",
                met,
                end_section=k == len(systems) - 1,
            )
    return table


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=1_000_000, help="records to build (default 1,000,000)")
    ap.add_argument("--questions", type=int, default=300, help="questions of each class (a)-(c)")
    ap.add_argument("--long-repeats", type=int, default=5, help="times each long input is asked")
    where_to = ap.add_mutually_exclusive_group()
    where_to.add_argument("--keep", type=Path, metavar="DIR", help="build into DIR and keep both files")
    where_to.add_argument("--reuse", type=Path, metavar="DIR", help="search the files a --keep DIR run built")
    ap.add_argument("--tree", type=Path, metavar="PATH", help="also search through this checkout's longterm")
    args = ap.parse_args()
    console = Console(width=200)
    with tempfile.TemporaryDirectory(prefix="million-") as tmp:
        where = args.reuse or args.keep or Path(tmp)
        if args.reuse:
            if not all((where / f).exists() for f in ("ours.db", "raw.db", "million.json")):
                raise SystemExit(f"{where} holds no store of --keep: build one with --keep {where}")
            meta = json.loads((where / "million.json").read_text())
        else:
            where.mkdir(parents=True, exist_ok=True)
            if any((where / f).exists() for f in ("ours.db", "raw.db")):
                raise SystemExit(
                    f"{where} already holds a store: search it with --reuse {where}, or keep into another DIR"
                )
            meta = asyncio.run(build(where, args.size, console))
        sizes = {who: on_disk(where / f"{who}.db") for who in ("raw", "ours")}
        console.print(saves_table(meta, sizes))
        console.print(f"build: {meta['build_wall_s']:,.0f} s wall (data made, both saved, interleaved)")
        console.print(asyncio.run(search(where, meta, args, console)))


if __name__ == "__main__":
    main()
