"""What ``pip install longterm`` puts on the disk: the default install against the old base set.

    python bench/install_size.py [--top 8] [--adk] [--keep DIR]

Builds the wheel of this tree (``pip wheel --no-deps .``), then for each set makes a fresh
venv in a temporary directory, installs the wheel there with its dependencies from the
index (the machine's pip settings), and sums the bytes of every file under site-packages,
by distribution (each ``*.dist-info/RECORD``, the ``.pyc`` files pip compiled included), less
the installer's own (pip, setuptools, wheel: every venv has them, whatever it installs):

- ``longterm``: the default install, the text engine alone (pydantic, click, rich, the stemmer);
- ``longterm + numpy``: the base set before numpy moved to the extras that use vectors
  (``numpy>=1.24`` added to the same wheel), the baseline, measured in the same run;
- ``longterm[adk]`` with ``--adk`` (for reference: google-adk's own dependencies).

Prints one table of totals (MB = 10^6 bytes, each against the baseline and the 40 MB goal),
then each set's biggest distributions. Sizes do not vary from run to run, so the sets run one
after the other; a set's install time is printed too, but only as a hint (the index and the
cache decide it). Asserts nothing.
"""

from __future__ import annotations

import argparse
import csv
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
GOAL_MB = 40.0
#: What every fresh venv holds before anything is installed: not the library's to count.
INSTALLER = {"pip", "setuptools", "wheel", "_distutils_hack", "pkg_resources", "distutils-precedence.pth"}


def _build_wheel(out: Path) -> Path:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT)],
        check=True,
        capture_output=True,
        text=True,
    )
    (wheel,) = out.glob("longterm-*.whl")
    return wheel


def _site_packages(venv: Path) -> Path:
    (site,) = venv.glob("lib/python*/site-packages")
    return site


def _install(venv: Path, requirements: list[str]) -> float:
    """A fresh venv at ``venv`` with ``requirements`` installed; seconds the install took."""
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    started = time.perf_counter()
    proc = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", *requirements],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise SystemExit(f"pip install {' '.join(requirements)} failed:\n{proc.stderr}")
    return time.perf_counter() - started


def _distribution(dist_info: Path) -> str:
    for line in (dist_info / "METADATA").read_text(encoding="utf-8", errors="replace").splitlines():
        if line.startswith("Name:"):
            return line.split(":", 1)[1].strip()
    return dist_info.name.split("-", 1)[0]


def _sizes(site: Path) -> dict[str, int]:
    """Bytes under ``site`` by distribution (its RECORD), the installer's left out; files no
    RECORD lists under ``(unlisted)``."""
    owner: dict[Path, str] = {}
    for dist_info in site.glob("*.dist-info"):
        name = _distribution(dist_info)
        record = dist_info / "RECORD"
        if not record.exists():
            continue
        with record.open(encoding="utf-8", newline="") as f:
            for row in csv.reader(f):
                if row:
                    owner[(site / row[0]).resolve()] = name
    sizes: dict[str, int] = {}
    for path in site.rglob("*"):
        if not path.is_file() or path.is_symlink():
            continue
        top = path.relative_to(site).parts[0]
        name = owner.get(path.resolve(), "(unlisted)")
        if name.lower() in INSTALLER or top in INSTALLER or top.split("-")[0] in INSTALLER:
            continue
        sizes[name] = sizes.get(name, 0) + path.stat().st_size
    return sizes


def _mb(n: float) -> str:
    return f"{n / 1e6:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--top", type=int, default=8, help="distributions listed per set")
    parser.add_argument("--adk", action="store_true", help="also longterm[adk], for reference")
    parser.add_argument("--keep", type=Path, help="make the venvs here and keep them (default: a temporary directory)")
    args = parser.parse_args()

    console = Console(width=160)  # a pipe would get 80 columns
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep.resolve() if args.keep else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        wheel = _build_wheel(work / "wheel")
        sets = {"longterm": [str(wheel)], "longterm + numpy (old base set)": [str(wheel), "numpy>=1.24"]}
        if args.adk:
            sets["longterm[adk]"] = [f"longterm[adk] @ {wheel.as_uri()}"]
        results: dict[str, tuple[dict[str, int], float]] = {}
        for i, (label, requirements) in enumerate(sets.items()):
            venv = work / f"venv{i}"
            seconds = _install(venv, requirements)
            results[label] = (_sizes(_site_packages(venv)), seconds)

    baseline = sum(results["longterm + numpy (old base set)"][0].values())
    totals = Table(
        title=f"site-packages of a fresh venv after pip install (MB; pip, setuptools, wheel left out); {wheel.name}"
    )
    for col in ("set", "distributions", "MB", "x baseline", f"vs {GOAL_MB:g} MB goal", "install s (hint)"):
        totals.add_column(col, justify="left" if col == "set" else "right")
    for label, (sizes, seconds) in results.items():
        total = sum(sizes.values())
        verdict = "meets" if total / 1e6 <= GOAL_MB else "misses"
        totals.add_row(
            escape(label),
            str(len(sizes)),
            _mb(total),
            f"{total / baseline:.2f}",
            f"{verdict} ({_mb(total)})",
            f"{seconds:.0f}",
        )
    console.print(totals)

    for label, (sizes, _) in results.items():
        table = Table(title=escape(f"{label}: the {args.top} biggest distributions"))
        for col in ("distribution", "MB", "share"):
            table.add_column(col, justify="left" if col == "distribution" else "right")
        total = sum(sizes.values())
        for name, size in sorted(sizes.items(), key=lambda kv: -kv[1])[: args.top]:
            table.add_row(name, _mb(size), f"{size / total:.0%}")
        console.print(table)


if __name__ == "__main__":
    main()
