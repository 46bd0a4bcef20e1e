"""Run a documented piece of Python as a program of its own, and say what it printed.

The seam: ``run(code_or_path, cwd=..., env=...)`` runs a block of the README or the docs (its
text) or a file of ``examples/`` (its path) as ``python file.py`` would: ``__name__`` is
``"__main__"``, the working directory and the environment are the ones given and nothing of
the test's, exit handlers run at the end, and a program still running after ``timeout``
seconds is killed and fails.

Why a fork server: each program runs in a process of its own, forked from a server that has
already imported longterm and Google ADK (``multiprocessing``'s forkserver, started once per
test process with the venv's Python), so a block pays for its own work, not for 1.5-3 s of
imports each. A process forked from the server has nothing of another block's state: its
modules are as imported, none used. ``fresh=True`` starts a new interpreter instead
(``python file.py`` exactly), for the one test that proves the two agree.
"""

from __future__ import annotations

import atexit
import multiprocessing
import os
import runpy
import subprocess
import sys
import tempfile
import traceback
from dataclasses import dataclass
from pathlib import Path

#: Imported once by the fork server; every program forked from it finds them loaded.
PRELOAD = [
    "longterm",
    "longterm.integrations.adk",
    "longterm.testing.scripted_llm",
    "google.adk.agents",
    "agents",  # the OpenAI Agents SDK: its pages and example
    "pydantic_ai",
]


@dataclass
class Ran:
    code: int
    out: str
    err: str

    def check(self, what: str) -> str:
        assert self.code == 0, f"{what} exited {self.code}:\n{self.err}\n{self.out}"
        return self.out


def _program(source: str | None, path: str, cwd: str, env: dict[str, str], out: str, err: str) -> None:
    """In the forked process: become ``python path`` in ``cwd`` with ``env``, then exit."""
    for fd, name in ((1, out), (2, err)):
        target = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(target, fd)
        os.close(target)
    sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115 - the process's own stream
    sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    sys.argv = [path]
    sys.path[0:0] = [str(Path(path).parent)]
    status = 0
    try:
        if source is None:
            runpy.run_path(path, run_name="__main__")
        else:
            namespace = {"__name__": "__main__", "__file__": path, "__builtins__": __builtins__}
            exec(compile(source, path, "exec"), namespace)
    except SystemExit as stop:
        status = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    except BaseException:
        traceback.print_exc()
        status = 1
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


_context: multiprocessing.context.BaseContext | None = None


def _forkserver() -> multiprocessing.context.BaseContext:
    global _context
    if _context is None:
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(PRELOAD)
        _context = ctx
    return _context


def run(
    what: str | Path,
    *,
    cwd: Path,
    env: dict[str, str],
    timeout: float = 60,
    fresh: bool = False,
    name: str = "block.py",
) -> Ran:
    """Run ``what`` (a block's text, or a file's ``Path``) as a program; see the module's docstring."""
    path = str(what) if isinstance(what, Path) else str(cwd / name)
    source = None if isinstance(what, Path) else what
    if source is not None:
        Path(path).write_text(source, encoding="utf-8")
    if fresh:
        done = subprocess.run(
            [sys.executable, path], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
        )
        return Ran(done.returncode, done.stdout, done.stderr)
    with tempfile.TemporaryDirectory() as tmp:
        out, err = os.path.join(tmp, "out"), os.path.join(tmp, "err")
        process = _forkserver().Process(target=_program, args=(source, path, str(cwd), env, out, err))
        process.start()
        process.join(timeout)
        if process.is_alive():
            process.kill()
            process.join()
            raise AssertionError(f"{name} still ran after {timeout} s:\n{Path(err).read_text()}")
        return Ran(process.exitcode or 0, Path(out).read_text(encoding="utf-8"), Path(err).read_text(encoding="utf-8"))
