"""A real OpenSearch 2.19.1 node (with the k-NN plugin) on 127.0.0.1, in a JVM.

Built by install-opensearch.sh from the Maven project beside this file. The node stops
when its standard input closes, so a crashed test run cannot leave it behind.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from tests.services.redis_server import free_port

HERE = Path(__file__).resolve().parent / "opensearch"
TARGET = HERE / "target"


class OpenSearchNode:
    name = "opensearch"

    def __init__(self) -> None:
        self.port = 0
        self.proc: subprocess.Popen | None = None
        self.log: list[str] = []

    def start(self, workdir: Path) -> None:
        jar = TARGET / "opensearch-node-1.0.jar"
        if not jar.exists():
            raise RuntimeError(f"{jar} is missing; run tests/services/install-opensearch.sh (scripts/test does)")
        java = shutil.which("java")
        if java is None:
            raise RuntimeError("java (17) is not installed; the OpenSearch test node needs it")
        self.port = free_port()
        data = workdir / "opensearch"
        classpath = os.pathsep.join([str(jar), str(TARGET / "lib" / "*"), str(TARGET / "knn" / "*")])
        transport = free_port()
        cmd = [java, "-Xms512m", "-Xmx1g", "-cp", classpath, "longterm.testnode.Node", str(self.port), str(transport), str(data),
               "org.opensearch.knn.plugin.KNNPlugin"]  # fmt: skip
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        ready = threading.Event()

        def pump() -> None:
            assert self.proc is not None and self.proc.stdout is not None
            for line in self.proc.stdout:
                self.log.append(line)
                del self.log[:-200]
                if line.rstrip().endswith(f"READY {self.port}"):  # the runner prefixes stdout lines
                    ready.set()

        threading.Thread(target=pump, daemon=True).start()
        deadline = time.time() + 180
        while not ready.is_set():
            if self.proc.poll() is not None:
                raise RuntimeError(f"the OpenSearch node exited with {self.proc.returncode}:\n{''.join(self.log[-40:])}")
            if time.time() > deadline:
                self.stop()
                raise RuntimeError(f"the OpenSearch node was not ready in 180 s:\n{''.join(self.log[-40:])}")
            ready.wait(0.5)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def config(self, tmp: Path) -> dict[str, Any]:
        return {"url": self.url, "prefix": f"t{uuid.uuid4().hex[:10]}-", "replicas": 0}

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.proc.stdin.close()  # the node's signal to shut down
                self.proc.wait(timeout=30)
            except Exception:
                self.proc.kill()
        self.proc = None
