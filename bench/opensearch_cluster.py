"""The opensearch backend past one machine: a 3-node cluster loses a node (kill -9) mid-save.

    python bench/opensearch_cluster.py [--sessions 240] [--events 10] [--users 12] [--heap 512m]

Starts three OpenSearch nodes on 127.0.0.1 (the test node's Maven project, one JVM each,
all eligible as cluster manager), and saves sessions through
``LongTermMemory(backend="opensearch", backend_config={"hosts": [3 urls], "replicas": 1})``
with a few concurrent savers while a searcher asks questions. A third of the way in, the
node holding the data index's primary shard is killed with SIGKILL. A save that fails is
retried by its caller (the ledger has not moved, so the retry writes what is missing and
duplicates nothing); saving and searching go on against the two nodes left. At the end
every user's records are read back and compared with what the policy should have kept.
Prints a table; exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

from _data import queries, texts  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from longterm import LongTermMemory, LongTermMemoryError  # noqa: E402
from longterm.policies import resolve_policy  # noqa: E402
from longterm.saves import plan_save  # noqa: E402
from longterm.sessions import read_session  # noqa: E402
from tests.services.opensearch_node import OpenSearchNode, start_cluster  # noqa: E402

APP = "cluster"
SAVERS = 4


def make_sessions(n: int, events: int, users: int) -> list[dict]:
    words = texts(n * events)
    return [
        {
            "id": f"s{s}",
            "app_name": APP,
            "user_id": f"user-{s % users}",
            "events": [
                {
                    "id": f"s{s}-e{i}",
                    "author": "user",
                    "timestamp": 1_700_000_000 + s * events + i,
                    "content": {"role": "user", "parts": [{"text": f"{words[s * events + i]} (s{s} t{i})"}]},
                }
                for i in range(events)
            ],
        }
        for s in range(n)
    ]


class Run(logging.Handler):
    """What happened, as the savers and the searcher saw it; as a log handler, it counts the
    requests the client sent again to another node (opensearch-py logs each failed try)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.client_retries = 0
        self.saved = 0
        self.in_flight = 0
        self.in_flight_at_kill = 0
        self.failed_saves: list[str] = []
        self.retried_whole = 0
        self.retried_none = 0
        self.killed_at: float | None = None
        self.first_save_after_kill: float | None = None
        self.searches = {"before": [0, 0], "outage": [0, 0]}  # [answered, failed]
        self.errors: dict[str, int] = {}
        self.done = False

    def emit(self, record: logging.LogRecord) -> None:
        self.client_retries += 1


async def saver(memory: LongTermMemory, queue: asyncio.Queue, run: Run) -> None:
    while not queue.empty():
        session = queue.get_nowait()
        failed = False
        for _attempt in range(60):
            run.in_flight += 1
            try:
                res = await memory.add_session_to_memory(session)
            except LongTermMemoryError as exc:
                failed = True
                run.failed_saves.append(session["id"])
                kind = type(exc).__name__
                run.errors[kind] = run.errors.get(kind, 0) + 1
                await asyncio.sleep(1)
                continue
            finally:
                run.in_flight -= 1
            if failed:  # the retry: the ledger has not moved (all new again) or the write had landed (none)
                run.retried_whole += res.new_events == len(session["events"])
                run.retried_none += res.new_events == 0
            run.saved += 1
            if run.killed_at is not None and run.first_save_after_kill is None:
                run.first_save_after_kill = time.perf_counter() - run.killed_at
            break
        else:
            raise SystemExit(f"session {session['id']} could not be saved in 60 attempts")


async def searcher(memory: LongTermMemory, qs: list[str], users: int, run: Run) -> None:
    i = 0
    while not run.done:
        phase = "before" if run.killed_at is None else "outage"
        try:
            await memory.search_memory(app_name=APP, user_id=f"user-{i % users}", query=qs[i % len(qs)])
            run.searches[phase][0] += 1
        except LongTermMemoryError as exc:
            run.searches[phase][1] += 1
            kind = f"search {type(exc).__name__}"
            run.errors[kind] = run.errors.get(kind, 0) + 1
        i += 1
        await asyncio.sleep(0.05)


def victim(memory: LongTermMemory, nodes: list[OpenSearchNode]) -> tuple[OpenSearchNode, str]:
    """The node holding the data index's primary shard, and what it was."""
    client = memory.backend_instance.client
    index = memory.backend_instance.index
    shards = client.cat.shards(index=index, format="json")
    name = next(s["node"] for s in shards if s["prirep"] == "p")
    manager = client.cat.cluster_manager(format="json")[0]["node"]
    roles = "primary of the data index" + (", cluster manager" if name == manager else "")
    return nodes[int(name.split("-")[1]) - 1], f"{name} ({roles})"


async def main_async(args: argparse.Namespace, nodes: list[OpenSearchNode]) -> tuple[Run, dict, str]:
    sessions = make_sessions(args.sessions, args.events, args.users)
    policy = resolve_policy(None)
    expected = {r.id for s in sessions for r in plan_save(read_session(s), set(), policy).records}
    hosts = [n.url for n in nodes]
    memory = LongTermMemory(backend="opensearch", backend_config={"hosts": hosts, "replicas": 1, "prefix": "bench-"})
    await memory.count(app_name=APP, user_id="user-0")  # the indices exist: find the primary's node
    memory.backend_instance.client.cluster.health(
        wait_for_status="green", params={"timeout": "60s", "request_timeout": 90}
    )
    node, what = victim(memory, nodes)
    run = Run()
    logging.getLogger("opensearch").addHandler(run)
    logging.getLogger("opensearch").propagate = False
    queue: asyncio.Queue = asyncio.Queue()
    for s in sessions:
        queue.put_nowait(s)

    def killer() -> None:
        while run.saved < len(sessions) // 3:
            time.sleep(0.01)
        run.in_flight_at_kill = run.in_flight
        node.kill()  # SIGKILL while the savers have saves in flight
        run.killed_at = time.perf_counter()

    threading.Thread(target=killer, daemon=True).start()
    search = asyncio.create_task(searcher(memory, queries(200), args.users, run))
    start = time.perf_counter()
    await asyncio.gather(*(saver(memory, queue, run) for _ in range(SAVERS)))
    elapsed = time.perf_counter() - start
    run.done = True
    await search
    found: list[str] = []
    for u in range(args.users):
        found += [r.id async for r in memory.iter_records(app_name=APP, user_id=f"user-{u}")]
    counted = sum([await memory.count(app_name=APP, user_id=f"user-{u}") for u in range(args.users)])
    health = memory.backend_instance.client.cluster.health()
    await memory.close()
    facts = {
        "expected": len(expected),
        "found": len(set(found)),
        "missing": len(expected - set(found)),
        "duplicates": len(found) - len(set(found)) + (counted - len(set(found))),
        "elapsed": elapsed,
        "health": f"{health['status']}, {health['number_of_nodes']} nodes, "
        f"{health['unassigned_shards']} unassigned shards",
    }
    return run, facts, what


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", type=int, default=240)
    ap.add_argument("--events", type=int, default=10)
    ap.add_argument("--users", type=int, default=12)
    ap.add_argument("--heap", default="512m", help="each JVM's largest heap")
    args = ap.parse_args()
    console = Console(width=140)
    tmp = tempfile.TemporaryDirectory()
    console.print(f"starting 3 OpenSearch nodes (-Xmx{args.heap} each) ...")
    t = time.perf_counter()
    nodes = start_cluster(3, Path(tmp.name), heap=args.heap)
    console.print(f"cluster up in {time.perf_counter() - t:.0f} s")
    try:
        run, facts, what = asyncio.run(main_async(args, nodes))
    finally:
        for n in nodes:
            n.stop()
        tmp.cleanup()
    table = Table(title="opensearch backend: 3 nodes, replicas 1, one node killed (SIGKILL) a third of the way in")
    table.add_column("measure")
    table.add_column("value", justify="right")
    before, outage = run.searches["before"], run.searches["outage"]
    first = "never" if run.first_save_after_kill is None else f"{run.first_save_after_kill:.1f} s"
    rows = [
        ("node killed", what),
        ("saves in flight at the kill", str(run.in_flight_at_kill)),
        ("sessions saved", f"{run.saved} of {args.sessions} ({args.events} events each) in {facts['elapsed']:.0f} s"),
        ("requests that failed on a node (the client tried another)", str(run.client_retries)),
        ("save attempts that failed (retried by the caller)", str(len(run.failed_saves))),
        ("  their retries: ledger had not moved / write had landed", f"{run.retried_whole} / {run.retried_none}"),
        ("first save completed after the kill", first),
        ("records expected", str(facts["expected"])),
        ("records found", str(facts["found"])),
        ("records missing", str(facts["missing"])),
        ("duplicates", str(facts["duplicates"])),
        ("searches answered before the kill", f"{before[0]} of {sum(before)}"),
        ("searches answered during the outage", f"{outage[0]} of {sum(outage)}"),
        ("errors seen (type: count)", ", ".join(f"{k}: {v}" for k, v in sorted(run.errors.items())) or "none"),
        ("cluster at the end", facts["health"]),
    ]
    for row in rows:
        table.add_row(*row)
    console.print(table)


if __name__ == "__main__":
    main()
