"""A real OpenSearch node with the k-NN plugin (the version pom.xml pins) on 127.0.0.1, in a JVM; or several
nodes of one cluster (``start_cluster``), each in its own JVM so one can be killed.

Built by install-opensearch.sh from the Maven project beside this file. A node stops when
its standard input closes, so a crashed run cannot leave it behind; ``kill`` is a crash
(SIGKILL, no shutdown).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

from tests.services.redis_server import free_port

HERE = Path(__file__).resolve().parent / "opensearch"
TARGET = HERE / "target"
KNN = "org.opensearch.knn.plugin.KNNPlugin"


#: What the tests' node sets on the indices the tests make (``t*``, ``config``'s prefix), as an
#: operator would with an index template: a save's ``refresh=wait_for`` waits for the next
#: refresh (1 s by default: half a second a save, most of the OpenSearch tests' time). The code
#: under test is the same; benchmarks keep the engine's defaults (``OpenSearchNode()``).
QUICK_TEMPLATE = {"index_patterns": ["t*"], "template": {"settings": {"index": {"refresh_interval": "50ms"}}}}

#: Set by the run's controller (``tests/conftest.py``) to the node it launched for all its workers.
SHARED_URL = "LONGTERM_TEST_OPENSEARCH_URL"


class OpenSearchNode:
    name = "opensearch"

    def __init__(self, heap: str = "1g", cluster: dict[str, str] | None = None, template: dict | None = None) -> None:
        """``heap``: the JVM's largest heap; ``cluster``: the ``longterm.*`` system properties of
        a node of a cluster (see Node.java), else the node is a cluster of its own; ``template``:
        an index template put once the node serves (``QUICK_TEMPLATE``: the tests')."""
        self.template = template
        self.port = 0
        self.transport = 0
        self.heap = heap
        self.cluster = cluster
        self.proc: subprocess.Popen | None = None
        self.workdir: Path | None = None
        self.log: list[str] = []
        self._ready = threading.Event()

    def start(self, workdir: Path, wait: float = 180) -> None:
        """Serve: attach to the node the run's controller launched (``SHARED_URL``: one JVM for every
        pytest-xdist worker), else launch one of this process's own."""
        shared = os.environ.get(SHARED_URL)
        if shared:
            self.attach(shared, wait)
        else:
            self.launch(workdir)
            self.wait_ready(wait)
        self._put_template()

    def attach(self, url: str, wait: float = 180) -> None:
        """Use the node at ``url`` (started by another process, stopped by it), once it serves."""
        self.port = int(url.rsplit(":", 1)[1])
        deadline = time.time() + wait
        while True:
            try:
                with urllib.request.urlopen(f"{url}/_cluster/health?wait_for_status=yellow&timeout=5s", timeout=10):
                    return
            except OSError as exc:  # not listening yet (connection refused), or not yet yellow (408)
                if time.time() > deadline:
                    msg = f"the shared OpenSearch node at {url} did not serve in {wait:g} s: {exc}"
                    raise RuntimeError(msg) from exc
                time.sleep(0.5)

    def _put_template(self) -> None:
        if self.template is None:
            return
        body = json.dumps(self.template).encode()
        req = urllib.request.Request(
            f"{self.url}/_index_template/longterm-tests", body, {"Content-Type": "application/json"}, method="PUT"
        )
        with urllib.request.urlopen(req, timeout=30) as resp:
            assert resp.status == 200, resp.read()

    def launch(self, workdir: Path) -> None:
        """Start the JVM; ``wait_ready`` waits for it to serve."""
        jar = TARGET / "opensearch-node-1.0.jar"
        if not jar.exists():
            raise RuntimeError(f"{jar} is missing; run tests/services/install-opensearch.sh (scripts/test does)")
        java = shutil.which("java")
        if java is None:
            raise RuntimeError("java (17) is not installed; the OpenSearch test node needs it")
        self.port = self.port or free_port()
        self.transport = self.transport or free_port()
        self.workdir = workdir
        data = workdir / "opensearch"
        classpath = os.pathsep.join([str(jar), str(TARGET / "lib" / "*"), str(TARGET / "knn" / "*")])
        props = [f"-Dlongterm.{k}={v}" for k, v in (self.cluster or {}).items()]
        args = [str(self.port), str(self.transport), str(data), KNN]
        cmd = [java, "-Xms512m", f"-Xmx{self.heap}", *props, "-cp", classpath, "longterm.testnode.Node", *args]
        pipe = subprocess.PIPE
        self.proc = subprocess.Popen(cmd, stdin=pipe, stdout=pipe, stderr=subprocess.STDOUT, text=True)
        self._ready.clear()
        threading.Thread(target=self._pump, args=(self.proc,), daemon=True).start()

    def _pump(self, proc: subprocess.Popen) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            self.log.append(line)
            del self.log[:-200]
            if line.rstrip().endswith(f"READY {self.port}"):  # the runner prefixes stdout lines
                self._ready.set()

    def wait_ready(self, wait: float = 180) -> None:
        assert self.proc is not None, "launch first"
        deadline = time.time() + wait
        while not self._ready.is_set():
            tail = "".join(self.log[-40:])
            if self.proc.poll() is not None:
                raise RuntimeError(f"the OpenSearch node exited with {self.proc.returncode}:\n{tail}")
            if time.time() > deadline:
                self.stop()
                raise RuntimeError(f"the OpenSearch node was not ready in {wait:g} s:\n{tail}")
            self._ready.wait(0.5)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def config(self, tmp: Path) -> dict[str, Any]:
        return {"url": self.url, "prefix": f"t{uuid.uuid4().hex[:10]}-", "replicas": 0}

    def kill(self) -> None:
        """Crash the node: SIGKILL, no shutdown, nothing flushed."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.proc.stdin.close()  # the node's signal to shut down
                self.proc.wait(timeout=30)
            except Exception:
                self.proc.kill()
        self.proc = None


def start_cluster(n: int, workdir: Path, heap: str = "512m", wait: float = 300) -> list[OpenSearchNode]:
    """``n`` nodes of one new cluster on 127.0.0.1, each in its own JVM with ``heap``, every
    one eligible as cluster manager; returned once each of them serves."""
    names = [f"node-{i + 1}" for i in range(n)]
    transports = [free_port() for _ in names]
    common = {
        "cluster": f"longterm-bench-{uuid.uuid4().hex[:8]}",
        "seeds": ",".join(f"127.0.0.1:{t}" for t in transports),
        "managers": ",".join(names),
    }
    nodes = [OpenSearchNode(heap, {**common, "node": name}) for name in names]
    try:
        for node, transport, name in zip(nodes, transports, names, strict=True):
            node.transport = transport
            node.launch(workdir / name)
        for node in nodes:
            node.wait_ready(wait)
    except BaseException:
        for node in nodes:
            node.stop()
        raise
    return nodes
