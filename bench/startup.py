"""What ``from longterm import LongTermMemory; LongTermMemory()`` costs a fresh process.

    python bench/startup.py [--runs 15] [--before /tmp/before] [--importtime] [--no-bytecode]

Four cases, each timed inside a fresh interpreter (``time.perf_counter`` and
``time.process_time`` around the statements, so the interpreter's own start is left out),
alternating run by run so a busy machine slows them alike:

- (a) ``import google.adk.memory``: what ADK alone costs;
- (b) the same plus ``from longterm import LongTermMemory; LongTermMemory()``;
- (c) longterm alone with google-adk blocked: a meta-path finder refuses ``google.adk`` and
  ``google.genai``, so the library runs its no-ADK path (``pip install longterm`` without the
  ``adk`` extra); the child checks that the path was taken (``HAVE_ADK`` false);
- (d) the floor of (c): ``asyncio``, ``sqlite3`` and pydantic with one model class, ADK
  blocked, what any library built on them pays before its own code runs.

"beyond ADK" is the median time of (b)'s longterm statements, timed in the process right after
ADK's import (the median of (b) minus that of (a) is printed next to it: the same quantity,
noisier, as two sets of processes are subtracted), against the 0.15 s goal; (c) is compared
with the same goal, and (c) minus (d) is longterm's own part of it. The CPU column is the
same run's ``process_time``: on a machine other work keeps busy it moves less than the wall
clock. Each child runs in a temporary directory with its own ``LONGTERM_HOME``
(``LongTermMemory()`` opens its store lazily, so nothing is written), loads longterm from the
tree timed (``PYTHONPATH``, checked), and reports whether numpy was imported.

Bytecode: an installed package has its ``.pyc`` files, so the children keep theirs in a
temporary ``PYTHONPYCACHEPREFIX`` (one untimed run of each case first). ``--no-bytecode``
compiles every import from source instead (``-B``), as a shell with
``PYTHONDONTWRITEBYTECODE=1`` and a fresh checkout does: every module then costs its compile.
``--before DIR`` times a second checkout (``git archive HEAD | tar -x -C DIR``) in the same
run, interleaved, and prints both. ``--importtime`` adds the sum of ``-X importtime``'s self
times for ``longterm.*`` modules in (b) and the ten biggest. Asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOAL = 0.15

BLOCK_ADK = """
import importlib.abc, sys
class _NoAdk(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[:2] in (['google', 'adk'], ['google', 'genai']):
            raise ModuleNotFoundError(f"No module named {name!r} (blocked)", name=name)
        return None
sys.meta_path.insert(0, _NoAdk())
"""

PROBE = """
import json, sys, time
t0, c0 = time.perf_counter(), time.process_time()
{adk}
t1, c1 = time.perf_counter(), time.process_time()
{lt}
t2, c2 = time.perf_counter(), time.process_time()
lt = getattr(sys.modules.get("longterm"), "__file__", None)
print(json.dumps({{
    "adk": t1 - t0, "lt": t2 - t1, "adk_cpu": c1 - c0, "lt_cpu": c2 - c1,
    "numpy": "numpy" in sys.modules, "have_adk": {have}, "file": lt,
}}))
"""

LONGTERM = "from longterm import LongTermMemory; LongTermMemory()"
#: What any library on pydantic and asyncio pays without ADK: their imports and a first model
#: class (pydantic builds its schema machinery then). Case (c) cannot go below it.
FLOOR = (
    "import asyncio, sqlite3\n"
    "from pydantic import BaseModel\n"
    "type('First', (BaseModel,), {'__annotations__': {'x': int}, '__module__': 'floor'})"
)

CASES = {
    "a": PROBE.format(adk="import google.adk.memory", lt="pass", have="None"),
    "b": PROBE.format(adk="import google.adk.memory", lt=LONGTERM, have="__import__('longterm').HAVE_ADK"),
    "c": BLOCK_ADK + PROBE.format(adk="pass", lt=LONGTERM, have="__import__('longterm').HAVE_ADK"),
    "d": BLOCK_ADK + PROBE.format(adk="pass", lt=FLOOR, have="None"),
}


#: Where the children keep their bytecode (``--no-bytecode``: None, every import compiles its source).
PYCACHE: str | None = None


def _run(tree: Path, code: str, *flags: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LONGTERM_", "PYTHONPYCACHEPREFIX"))}
    env["PYTHONPATH"] = str(tree)
    if PYCACHE is None:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        flags = (*flags, "-B")
    else:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = PYCACHE
    with tempfile.TemporaryDirectory() as cwd:
        env["LONGTERM_HOME"] = cwd
        return subprocess.run(
            [sys.executable, *flags, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, check=True
        )


#: One child's report: wall and CPU seconds of its two steps, numpy and ADK seen, longterm's file.
Sample = dict[str, float | bool | str | None]


def _probe(tree: Path, case: str) -> Sample:
    out: Sample = json.loads(_run(tree, CASES[case]).stdout.strip().splitlines()[-1])
    if out["file"] is not None and not str(out["file"]).startswith(str(tree)):
        raise SystemExit(f"longterm was imported from {out['file']}, not from {tree}")
    return out


_LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \| +(\S+)")


def _importtime(tree: Path) -> tuple[float, list[tuple[str, float]]]:
    """Self times (s) of ``longterm.*`` modules under ``-X importtime`` in case (b)."""
    err = _run(tree, CASES["b"], "-X", "importtime").stderr
    own = [(m[3], int(m[1]) / 1e6) for m in _LINE.finditer(err) if m[3].split(".")[0] == "longterm"]
    own.sort(key=lambda r: -r[1])
    return sum(s for _, s in own), own[:10]


def main() -> None:
    global PYCACHE
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--before", type=Path, help="another checkout to time in the same run")
    parser.add_argument("--importtime", action="store_true")
    parser.add_argument("--no-bytecode", action="store_true", help="compile every import from source (-B)")
    args = parser.parse_args()

    trees = {"now": ROOT} | ({"before": args.before.resolve()} if args.before else {})
    with tempfile.TemporaryDirectory() as cache:
        PYCACHE = None if args.no_bytecode else cache
        for tree in trees.values():  # one untimed run each: bytecode written, files in the page cache
            for case in CASES:
                _probe(tree, case)
        samples: dict[tuple[str, str], list[Sample]] = {}
        for _ in range(args.runs):
            for label, tree in trees.items():
                for case in CASES:
                    samples.setdefault((label, case), []).append(_probe(tree, case))
        _report(args, trees, samples)


#: The table's rows: a key, what the row times, the case and the steps of it summed.
ROWS = (
    ("a", "(a) import google.adk.memory", "a", ("adk",)),
    ("b", "(b) the same + longterm", "b", ("adk", "lt")),
    ("beyond", "    of which longterm's statements (beyond ADK)", "b", ("lt",)),
    ("c", "(c) longterm, google-adk blocked", "c", ("lt",)),
    ("d", "(d) its floor: asyncio, sqlite3, pydantic", "d", ("lt",)),
)


def _times(runs: list[Sample], parts: tuple[str, ...], cpu: bool = False) -> list[float]:
    keys = [f"{p}_cpu" if cpu else p for p in parts]
    return [sum(float(s[k] or 0) for k in keys) for s in runs]


def _report(args: argparse.Namespace, trees: dict[str, Path], samples: dict[tuple[str, str], list[Sample]]) -> None:
    how = "source compiled at every import" if args.no_bytecode else "bytecode cached, as an installed package"
    print(f"{args.runs} fresh processes per case, alternating; {how}; seconds")
    head = f"{'':8}{'case':48}{'wall median':>12}{'min':>8}{'cpu median':>12}"
    print(head)
    print("-" * len(head))
    for label in trees:
        med: dict[str, float] = {}
        for i, (key, name, case, parts) in enumerate(ROWS):
            wall, cpu = _times(samples[label, case], parts), _times(samples[label, case], parts, cpu=True)
            med[key] = statistics.median(wall)
            print(f"{label if i == 0 else '':8}{name:48}{med[key]:12.3f}{min(wall):8.3f}{statistics.median(cpu):12.3f}")
        numpy = any(s["numpy"] for case in "bc" for s in samples[label, case])
        print(
            f"{'':8}beyond ADK {med['beyond']:.3f} s ((b)-(a): {med['b'] - med['a']:.3f} s): "
            f"{'meets' if med['beyond'] <= GOAL else 'misses'} the {GOAL} s goal"
        )
        print(
            f"{'':8}without ADK {med['c']:.3f} s: {'meets' if med['c'] <= GOAL else 'misses'} it; the floor (d) "
            f"{med['d']:.3f} s, longterm's own (c)-(d) {med['c'] - med['d']:.3f} s; "
            f"numpy imported: {'yes' if numpy else 'no'}"
        )
        if not all(s["have_adk"] for s in samples[label, "b"]) or any(s["have_adk"] for s in samples[label, "c"]):
            print(f"{'':8}warning: HAVE_ADK was not True in (b) and False in (c)")
        if args.importtime:
            total, top = _importtime(trees[label])
            print(f"{'':8}-X importtime in (b), longterm.* self times: {total:.3f} s; biggest:")
            for name, secs in top:
                print(f"{'':10}{secs * 1000:6.1f} ms  {name}")
        print()


if __name__ == "__main__":
    main()
