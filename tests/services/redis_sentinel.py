"""A Redis failover group on 127.0.0.1: a primary, a replica and three Sentinels, all processes of
the redis-server the tests already install (``redis_server``), each in a directory of its own.

``kill_primary`` is a crash (SIGKILL); ``wait_failover`` waits until the Sentinels name another
primary; ``restart_old`` brings the killed process back empty on its port, where the Sentinels
make it a replica of the new primary (so ``WAIT 1`` can be answered again).
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

import redis

from tests.services.redis_server import LIBSSL, RedisServer, _stack_dir, free_port

SERVICE = "mymaster"


class SentinelGroup:
    def __init__(self, workdir: Path, *, down_after_ms: int = 1000) -> None:
        self.workdir = workdir
        self.down_after_ms = down_after_ms
        self.primary = RedisServer()
        self.primary.port = free_port()
        self.replica = RedisServer(args=("--replicaof", "127.0.0.1", str(self.primary.port)))
        self.sentinel_ports = [free_port() for _ in range(3)]
        self.sentinels: list[subprocess.Popen] = []
        self.killed: RedisServer | None = None

    @property
    def addresses(self) -> list[tuple[str, int]]:
        return [("127.0.0.1", p) for p in self.sentinel_ports]

    def start(self, wait: float = 30) -> None:
        self.primary.start(self._dir("primary"))
        self.replica.start(self._dir("replica"))
        self._until(lambda: self._info(self.replica.port, "replication").get("master_link_status") == "up", wait)
        for port in self.sentinel_ports:
            self.sentinels.append(self._sentinel(port))
        # Failover needs a majority of Sentinels that know each other, and the replica known.
        self._until(lambda: all(self._sees_all(p) for p in self.sentinel_ports), wait)

    def primary_port(self) -> int:
        r = redis.Redis(port=self.sentinel_ports[0], socket_timeout=1)
        try:
            return int(r.sentinel_get_master_addr_by_name(SERVICE)[1])
        finally:
            r.close()

    def kill_primary(self) -> None:
        port = self.primary_port()
        self.killed = self.primary if self.primary.port == port else self.replica
        self.killed.kill()

    def wait_failover(self, wait: float = 30) -> int:
        """The new primary's port, once a Sentinel names it and it answers as a primary."""
        assert self.killed is not None
        old = self.killed.port
        self._until(lambda: self.primary_port() != old, wait)
        port = self.primary_port()
        self._until(lambda: self._info(port, "replication").get("role") == "master", wait)
        return port

    def restart_old(self, wait: float = 30) -> None:
        """The killed process again, empty; the Sentinels turn it into a replica of the new primary."""
        assert self.killed is not None
        self.killed.restart()
        port = self.killed.port
        self._until(lambda: self._info(port, "replication").get("master_link_status") == "up", wait)

    def stop(self) -> None:
        for proc in self.sentinels:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
        self.sentinels = []
        for server in (self.primary, self.replica):
            server.stop()

    # -- helpers ---------------------------------------------------------------------------------

    def _dir(self, name: str) -> Path:
        path = self.workdir / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    def _sentinel(self, port: int) -> subprocess.Popen:
        conf = self._dir(f"sentinel-{port}") / "sentinel.conf"  # Sentinel rewrites its file: one each
        conf.write_text(
            f"port {port}\nbind 127.0.0.1\ndir {conf.parent}\n"
            f"sentinel monitor {SERVICE} 127.0.0.1 {self.primary.port} 2\n"
            f"sentinel down-after-milliseconds {SERVICE} {self.down_after_ms}\n"
            f"sentinel failover-timeout {SERVICE} 5000\nsentinel parallel-syncs {SERVICE} 1\n"
        )
        env = {**os.environ, "LD_LIBRARY_PATH": f"{LIBSSL}:{os.environ.get('LD_LIBRARY_PATH', '')}"}
        cmd = [str(_stack_dir() / "bin" / "redis-server"), str(conf), "--sentinel"]
        with open(conf.parent / "sentinel.log", "ab") as log:
            proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
        self._until(lambda: self._pings(port), 20, proc)
        return proc

    def _sees_all(self, port: int) -> bool:
        r = redis.Redis(port=port, socket_timeout=1)
        try:
            return len(r.sentinel_sentinels(SERVICE)) == 2 and len(r.sentinel_slaves(SERVICE)) >= 1
        except redis.RedisError:
            return False
        finally:
            r.close()

    @staticmethod
    def _pings(port: int) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
                s.sendall(b"PING\r\n")
                return s.recv(64).startswith(b"+PONG")
        except OSError:
            return False

    @staticmethod
    def _info(port: int, section: str) -> dict:
        r = redis.Redis(port=port, socket_timeout=1)
        try:
            return dict(r.info(section))
        except redis.RedisError:
            return {}
        finally:
            r.close()

    @staticmethod
    def _until(check, wait: float, proc: subprocess.Popen | None = None) -> None:
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if proc is not None and proc.poll() is not None:
                raise RuntimeError(f"redis-server --sentinel exited with {proc.returncode}")
            if check():
                return
            time.sleep(0.1)
        raise RuntimeError(f"the Redis failover group was not ready within {wait:g} s ({check})")
