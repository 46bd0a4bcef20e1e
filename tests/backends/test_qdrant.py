"""Qdrant-specific behaviour of both engines (qdrant-edge, and qdrant-client in local mode):
the embedded single-process lock (and its release when a memory is dropped unclosed), hybrid
fusion modes, embedder identity, the ledger inside the store, erasing, closing, configuration.
(No Qdrant server runs on this machine: the url path is exercised only against a closed port;
see README.)"""

from __future__ import annotations

import asyncio
import gc
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from longterm import BackendUnavailableError, ConfigurationError, LongTermMemory
from longterm.backends.qdrant import Qdrant, QdrantBackend, QdrantEdgeBackend, collection_name
from longterm.retrieval.embedders import HashingEmbedder
from tests.conftest import make_session
from tests.services.redis_server import free_port

ROOT = Path(__file__).resolve().parents[2]
ENGINES = ["edge", "local"]


def _memory(path: Path, engine: str, **kwargs) -> LongTermMemory:
    config = {"path": str(path), "engine": engine, **kwargs.pop("config", {})}
    kwargs.setdefault("app_name", "app")  # the sessions' app: the memory's own index is where they live
    return LongTermMemory(backend="qdrant", backend_config=config, **kwargs)


class OtherEmbedder(HashingEmbedder):
    """Another embedder of the same dimension: its vectors must never mix with HashingEmbedder's."""

    def __init__(self, dim: int) -> None:
        super().__init__(dim)
        self.id = f"other-{dim}"


async def test_second_process_gets_a_clear_error_not_a_hang(tmp_path: Path):
    path = str(tmp_path / "q")
    memory = LongTermMemory(backend="qdrant", backend_config={"path": path})
    await memory.add_session_to_memory(make_session())
    code = (
        "import sys; from longterm import LongTermMemory, BackendUnavailableError\n"
        f"m = LongTermMemory(backend='qdrant', backend_config={{'path': {path!r}}})\n"
        "try:\n    m.count_sync(app_name='app', user_id='u1')\n"
        "except BackendUnavailableError as e:\n    print(e); sys.exit(3)"
    )
    start = time.monotonic()
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 3, out.stderr
    assert "open in another process" in out.stdout and "url" in out.stdout
    assert time.monotonic() - start < 30
    await memory.close()


async def test_unreachable_server_is_a_clear_error():
    memory = LongTermMemory(backend="qdrant", backend_config={"url": f"http://127.0.0.1:{free_port()}", "timeout": 2})
    with pytest.raises(BackendUnavailableError, match=r"cannot reach qdrant at http://127\.0\.0\.1:\d+"):
        await memory.search_memory(app_name="a", user_id="u", query="hello")
    await memory.close()


@pytest.mark.filterwarnings("ignore:Api key is used with an insecure connection")
async def test_a_refused_api_key_is_a_configuration_error():
    """Every request answered 401 (a server refusing the key): the error says which key to check."""

    class Refuse(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(401)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Refuse)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    memory = LongTermMemory(backend="qdrant", backend_config={"url": url, "api_key": "wrong", "timeout": 5})
    try:
        with pytest.raises(ConfigurationError, match="LONGTERM_QDRANT_API_KEY"):
            await memory.count(app_name="a", user_id="u")
    finally:
        await memory.close()
        server.shutdown()


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("fusion", ["convex", "rrf"])
async def test_hybrid_search(tmp_path: Path, fusion: str, engine: str):
    memory = _memory(tmp_path / "q", engine, config={"fusion": fusion}, embedder=HashingEmbedder(64))
    turns = [("user", "bees make honey in summer"), ("user", "my car is blue")]
    await memory.add_session_to_memory(make_session(turns=turns))
    await memory.add_session_to_memory(make_session(user="other", turns=[("user", "other user's bees and honey")]))
    res = await memory.search_memory(app_name="app", user_id="u1", query="honey bees")
    assert res.memories[0].content.parts[0].text == "bees make honey in summer"
    assert all("other user" not in m.content.parts[0].text for m in res.memories)
    await memory.close()


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("other", [HashingEmbedder(32), OtherEmbedder(64)], ids=["other-dim", "same-dim"])
async def test_a_store_refuses_another_embedder(tmp_path: Path, engine: str, other: HashingEmbedder):
    m = _memory(tmp_path / "q", engine, embedder=HashingEmbedder(64))
    await m.add_session_to_memory(make_session())
    await m.close()
    again = _memory(tmp_path / "q", engine, embedder=other)
    with pytest.raises(ConfigurationError, match="Vectors of different embedders never mix"):
        await again.count(app_name="app", user_id="u1")
    await again.close()


@pytest.mark.parametrize("engine", ENGINES)
async def test_a_store_made_without_embedder_answers_from_full_text_when_opened_with_one(tmp_path: Path, engine: str):
    plain = _memory(tmp_path / "q", engine)
    await plain.add_session_to_memory(make_session(turns=[("user", "bees make honey"), ("user", "my car is blue")]))
    await plain.close()
    memory = _memory(tmp_path / "q", engine, embedder=HashingEmbedder(64))
    try:
        later = make_session("s2", turns=[("user", "the bees swarmed in june")])
        assert (await memory.add_session_to_memory(later)).saved == 1
        res = await memory.search_memory(app_name="app", user_id="u1", query="bees")
        assert sorted(m.content.parts[0].text for m in res.memories) == ["bees make honey", "the bees swarmed in june"]
        assert all("full text only" in m.custom_metadata["degraded"] for m in res.memories)
    finally:
        await memory.close()


@pytest.mark.parametrize("engine", ENGINES)
async def test_saving_large_events_does_not_stall_the_event_loop(tmp_path: Path, engine: str):
    """Full-text vectors of 100 events of 50 KB are computed on the engine's thread: a ticker
    on the event loop keeps ticking through the save. (Computed on the loop, they stalled it
    for 0.7 s here; qdrant-edge's own update and flush hold the GIL for up to ~0.25 s on a
    busy machine, which no engine code of ours can shorten.)"""
    words = " ".join(f"word{i} topic{i % 97}" for i in range(5000))
    turns = [("user", f"event {i} {words}"[:50_000]) for i in range(100)]
    memory = _memory(tmp_path / "q", engine)
    await memory.count(app_name="app", user_id="u1")  # the store is open before we measure
    lags: list[float] = []
    saving = True

    async def ticker() -> None:
        while saving:
            before = time.perf_counter()
            await asyncio.sleep(0.005)
            lags.append(time.perf_counter() - before - 0.005)

    tick = asyncio.create_task(ticker())
    try:
        assert (await memory.add_session_to_memory(make_session(turns=turns))).saved == 100
    finally:
        saving = False
        await tick
        await memory.close()
    assert max(lags) < 0.4, f"the event loop stalled for {max(lags):.3f} s"


@pytest.mark.parametrize("engine", ENGINES)
async def test_a_second_close_does_nothing(tmp_path: Path, engine: str):
    memory = _memory(tmp_path / "q", engine)
    await memory.add_session_to_memory(make_session())
    backend = memory.backend_instance
    await memory.close()
    await memory.close()
    await backend.close()


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("swap", ["path", "index"])
async def test_another_store_saves_everything_again(tmp_path: Path, engine: str, swap: str):
    """The ledger lives in its store: a session saved into store A is saved whole into B."""
    session = make_session(turns=[("user", "I was born in Porto"), ("user", "I like tea")])
    first = _memory(tmp_path / "a", engine, config={"index": "one"})
    assert (await first.add_session_to_memory(session)).saved == 2
    await first.close()
    b = {"path": (tmp_path / "b", "one"), "index": (tmp_path / "a", "two")}[swap]
    second = _memory(b[0], engine, config={"index": b[1]})
    try:
        assert (await second.add_session_to_memory(session)).saved == 2
        assert await second.count(app_name="app", user_id="u1") == 2
    finally:
        await second.close()


@pytest.mark.parametrize("engine", ENGINES)
async def test_erasing_one_session(tmp_path: Path, engine: str):
    memory = _memory(tmp_path / "q", engine)
    try:
        await memory.add_session_to_memory(make_session("s1", turns=[("user", "tea in the morning")]))
        await memory.add_session_to_memory(make_session("s2", turns=[("user", "tea at night"), ("user", "more tea")]))
        await memory.add_session_to_memory(make_session("s2", user="u2", turns=[("user", "tea of u2")]))
        assert await memory.delete_memory(app_name="app", user_id="u1", session_id="s2") == 2
        assert [r.text async for r in memory.iter_records(app_name="app", user_id="u1")] == ["tea in the morning"]
        assert await memory.count(app_name="app", user_id="u2") == 1
        # what was erased stays erased: the ledger still holds the session's events
        again = make_session("s2", turns=[("user", "tea at night"), ("user", "more tea")])
        assert (await memory.add_session_to_memory(again)).saved == 0
    finally:
        await memory.close()


def test_configuration(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("LONGTERM_QDRANT_URL", raising=False)
    b = Qdrant.from_config({"index": "x"}, root=tmp_path)
    assert isinstance(b, QdrantEdgeBackend) and b.path == tmp_path / "qdrant"
    b = Qdrant.from_config({"index": "x", "engine": "local"}, root=tmp_path)
    assert isinstance(b, QdrantBackend) and b.url is None and b.path == str(tmp_path / "qdrant")
    monkeypatch.setenv("LONGTERM_QDRANT_URL", "http://qdrant:6333")
    monkeypatch.setenv("LONGTERM_QDRANT_API_KEY", "k")
    b = Qdrant.from_config({"index": "x"}, root=tmp_path)
    assert isinstance(b, QdrantBackend) and (b.url, b.api_key, b.path) == ("http://qdrant:6333", "k", None)
    assert Qdrant.from_config({"host": "h", "port": 1}, root=tmp_path).url == "http://h:1"
    assert collection_name("longterm_", "shop") == "longterm_shop"
    assert collection_name("longterm_", "a/b") != collection_name("longterm_", "a_b")
    with pytest.raises(ConfigurationError, match="'pth'"):
        LongTermMemory(backend="qdrant", backend_config={"pth": "x"})


async def test_qdrant_client_points_read_by_every_version_and_old_points_by_this_one(tmp_path: Path):
    """qdrant-client keeps the record spread out in the payload, the form earlier versions read
    (processes of two versions may share a server during an upgrade), and reads, counts and
    erases points written that way before."""
    from longterm.backends.qdrant.common import SPARSE, point_id
    from longterm.records import MemoryRecord, Scope, record_id
    from longterm.retrieval.sparse import document_vector

    memory = _memory(tmp_path / "q", "local")
    await memory.add_session_to_memory(make_session(sid="new", turns=[("user", "I keep bees")]))
    backend = memory.backend_instance
    scope = Scope(app_name="app", user_id="u1")
    [point], _ = backend._client.scroll(backend.collection, limit=10)
    assert MemoryRecord.model_validate(point.payload).text == "I keep bees"  # what an earlier version reads
    ids = {"app_name": "app", "user_id": "u1", "session_id": "old", "event_id": "e1"}
    old = MemoryRecord(id=record_id("app", "u1", "old", "e1"), **ids, role="user", text="I moved to Lisbon")
    idx, val = document_vector(old.text)
    vector = {SPARSE: backend._m.SparseVector(indices=idx, values=val)}
    point = backend._m.PointStruct(id=point_id(old.id), vector=vector, payload=old.model_dump(mode="json"))
    backend._client.upsert(backend.collection, [point])
    assert [h.record for h in await backend.search(scope, "Lisbon", 3)] == [old]
    assert await backend.count(scope) == 2 and old in [r async for r in backend.scan(scope)]
    assert await backend.delete(scope, session_id="old") == 1 and await backend.count(scope) == 1
    await memory.close()


@pytest.mark.parametrize("engine", ENGINES)
async def test_an_index_name_of_300_characters_works_and_stays_apart(tmp_path: Path, engine: str):
    """The index defaults to the app name, which may be long: a 300-character one failed
    ("File name too long" on edge, "at most 255 characters" in local mode)."""
    long_a, long_b = "a" * 299 + "1", "a" * 299 + "2"
    first = _memory(tmp_path / "q", engine, index=long_a)
    await first.add_session_to_memory(make_session(turns=[("user", "I keep bees")]))
    await first.close()
    second = _memory(tmp_path / "q", engine, index=long_b)
    assert await second.count(app_name="app", user_id="u1") == 0
    await second.close()
    first = _memory(tmp_path / "q", engine, index=long_a)
    res = await first.search_memory(app_name="app", user_id="u1", query="bees")
    assert [m.content.parts[0].text for m in res.memories] == ["I keep bees"]
    await first.close()


def _threads_and_files(under: Path) -> tuple[set[threading.Thread], list[str]]:
    """This process's longterm threads, and its descriptors open on files under ``under``."""
    names = {t for t in threading.enumerate() if t.name.startswith("longterm-") and "embed" not in t.name}
    fds = Path("/proc/self/fd")
    files = []
    for fd in fds.iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith(str(under.resolve())):
            files.append(target)
    return names, files


def _until(check, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
        gc.collect()  # what the ended threads held may be in cycles: the collector runs, as it would
    return check()


@pytest.mark.parametrize("engine", ENGINES)
def test_a_dropped_memory_releases_the_store_its_threads_and_files(tmp_path: Path, engine: str):
    """A notebook cell run twice: the first memory, never closed, is dropped and a new one opens the
    same path in the same process (it used to hear "open in another process" until a restart)."""
    path = tmp_path / "q"
    threads_before, _ = _threads_and_files(path)
    memory = _memory(path, engine)
    memory.add_session_to_memory_sync(make_session())
    assert asyncio.run(memory.count(app_name="app", user_id="u1")) == 1
    del memory
    gc.collect()
    assert _until(lambda: _released(path, threads_before)), _threads_and_files(path)
    again = _memory(path, engine)
    assert again.count_sync(app_name="app", user_id="u1") == 1
    assert again.search_memory_sync(app_name="app", user_id="u1", query="hiking").memories
    again.close_sync()
    assert _until(lambda: _released(path, threads_before)), _threads_and_files(path)


def _released(path: Path, threads_before: set[threading.Thread]) -> bool:
    """No longterm thread beyond those alive before, and no file open under ``path``. A subset, not
    equality: a thread of the previous test's memory, still ending when this one began, may end
    during it (that made this test fail after [local] half of the runs)."""
    threads, files = _threads_and_files(path)
    return threads <= threads_before and files == []
