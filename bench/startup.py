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
run, interleaved, and prints both with the ratio now / before (wall and CPU medians): on a
machine others share, the ratios and longterm's own part ((c) minus (d), run by run) say
more than the absolute times. ``--importtime`` adds the sum of ``-X importtime``'s self
times for ``longterm.*`` modules in (b) and the ten biggest (each the least of 3 runs).
Prints rich tables; asserts nothing.
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

from rich.console import Console
from rich.table import Table

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


def _importtime(trees: dict[str, Path], runs: int = 3) -> dict[str, tuple[float, list[tuple[str, float]]]]:
    """Per tree: self times (s) of ``longterm.*`` modules under ``-X importtime`` in case (b),
    each the least of ``runs`` runs, the trees alternating (a busy machine inflates some run of
    every module)."""
    best: dict[str, dict[str, float]] = {label: {} for label in trees}
    for _ in range(runs):
        for label, tree in trees.items():
            for m in _LINE.finditer(_run(tree, CASES["b"], "-X", "importtime").stderr):
                if m[3].split(".")[0] == "longterm":
                    best[label][m[3]] = min(best[label].get(m[3], float("inf")), int(m[1]) / 1e6)
    out = {}
    for label, times in best.items():
        own = sorted(times.items(), key=lambda r: -r[1])
        out[label] = (sum(s for _, s in own), own[:10])
    return out


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


def _medians(samples: dict[tuple[str, str], list[Sample]], label: str) -> dict[str, tuple[float, float, float]]:
    """Per row (and ``own``, (c) minus (d) run by run): wall median, wall min, CPU median."""
    out: dict[str, tuple[float, float, float]] = {}
    for key, _, case, parts in ROWS:
        wall, cpu = _times(samples[label, case], parts), _times(samples[label, case], parts, cpu=True)
        out[key] = (statistics.median(wall), min(wall), statistics.median(cpu))
    c, d = samples[label, "c"], samples[label, "d"]
    own = [x - y for x, y in zip(_times(c, ("lt",)), _times(d, ("lt",)), strict=True)]
    own_cpu = [x - y for x, y in zip(_times(c, ("lt",), True), _times(d, ("lt",), True), strict=True)]
    out["own"] = (statistics.median(own), min(own), statistics.median(own_cpu))
    return out


def _report(args: argparse.Namespace, trees: dict[str, Path], samples: dict[tuple[str, str], list[Sample]]) -> None:
    how = "source compiled at every import" if args.no_bytecode else "bytecode cached, as an installed package"
    console = Console(width=220)  # the table is wide; a pipe would get 80 columns
    med = {label: _medians(samples, label) for label in trees}
    rows = [*((key, name) for key, name, _, _ in ROWS), ("own", "    longterm's own: (c) - (d), run by run")]
    table = Table(title=f"{args.runs} fresh processes per case, alternating; {how}; seconds")
    table.add_column("case")
    for label in trees:
        table.add_column(f"{label} wall median", justify="right")
        table.add_column("min", justify="right")
        table.add_column("cpu median", justify="right")
    if "before" in trees:
        table.add_column("now / before wall", justify="right")
        table.add_column("cpu", justify="right")
    for key, name in rows:
        cells = [name]
        for label in trees:
            wall, low, cpu = med[label][key]
            cells += [f"{wall:.3f}", f"{low:.3f}", f"{cpu:.3f}"]
        if "before" in trees:
            (now, _, now_cpu), (was, _, was_cpu) = med["now"][key], med["before"][key]
            cells += [f"{now / was:.2f}" if was > 0 else "-", f"{now_cpu / was_cpu:.2f}" if was_cpu > 0 else "-"]
        table.add_row(*cells)
    console.print(table)
    for label in trees:
        m = med[label]
        numpy = any(s["numpy"] for case in "bc" for s in samples[label, case])
        beyond, c, d, own = m["beyond"][0], m["c"][0], m["d"][0], m["own"][0]
        console.print(
            f"{label}: beyond ADK {beyond:.3f} s ((b)-(a): {m['b'][0] - m['a'][0]:.3f} s): "
            f"{'meets' if beyond <= GOAL else 'misses'} the {GOAL} s goal; without ADK {c:.3f} s: "
            f"{'meets' if c <= GOAL else 'misses'} it (the floor (d) {d:.3f} s, longterm's own {own:.3f} s, "
            f"{c / d:.2f}x the floor); numpy imported: {'yes' if numpy else 'no'}",
            highlight=False,
        )
        if not all(s["have_adk"] for s in samples[label, "b"]) or any(s["have_adk"] for s in samples[label, "c"]):
            console.print(f"{label}: warning: HAVE_ADK was not True in (b) and False in (c)")
    if args.importtime:
        tops = _importtime(trees)
        imports = Table(title="-X importtime in (b): longterm.* self times (ms), the least of 3 runs per module")
        for label in trees:
            imports.add_column(f"{label} module")
            imports.add_column("ms", justify="right")
        imports.add_row(*(cell for total, _ in tops.values() for cell in ("all longterm.*", f"{total * 1000:.1f}")))
        for i in range(10):
            cells: list[str] = []
            for _, top in tops.values():
                cells += [top[i][0], f"{top[i][1] * 1000:.1f}"] if i < len(top) else ["", ""]
            imports.add_row(*cells)
        console.print(imports)


if __name__ == "__main__":
    main()
