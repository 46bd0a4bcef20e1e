"""What is installed against requirements/lock.txt: the proof that a run used the lock.

``python scripts/lock_check.py LOCK`` exits 1 naming every package whose installed version is
not the locked one, or that is installed without being locked (the project itself aside), so a
green locked run cannot hide a release the lock does not name. ``--report`` only lists the
differences (``scripts/test --latest`` prints them: the drift that run is testing).
"""

from __future__ import annotations

import re
import sys
from importlib import metadata

from packaging.utils import canonicalize_name

# Installed by the virtual environment itself, not by the lock.
SEEDS = {"pip", "setuptools", "wheel", "longterm"}


def locked(path: str) -> dict[str, str]:
    with open(path, encoding="utf-8") as lines:
        pins = (re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)", line) for line in lines)
        return {canonicalize_name(m.group(1)): m.group(2) for m in pins if m}


def installed() -> dict[str, str]:
    return {canonicalize_name(d.metadata["Name"]): d.version for d in metadata.distributions()}


def main(argv: list[str]) -> int:
    path, report = argv[0], "--report" in argv[1:]
    want, have = locked(path), installed()
    diffs = [
        f"{name}=={want[name]} -> {have.get(name, 'missing')}" for name in sorted(want) if have.get(name) != want[name]
    ]
    diffs += [f"{name} (not in the lock) -> {have[name]}" for name in sorted(set(have) - set(want) - SEEDS)]
    if report:
        print("\n".join(diffs) if diffs else f"nothing: the newest releases are {path}'s")
        return 0
    if diffs:
        print(f"installed is not {path} (run `bash scripts/test` again, or `bash scripts/lock`):", file=sys.stderr)
        print("\n".join(f"  {d}" for d in diffs), file=sys.stderr)
        return 1
    print(f"installed = {path}: {len(want)} packages, each at its locked version")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
