"""A light start: what ``from longterm import LongTermMemory; LongTermMemory()`` leaves unloaded.

Each check runs in a fresh interpreter and reads its ``sys.modules``: numpy (no embedder on
the default path), OpenTelemetry's API (nothing listens until a provider may be set), the
fact layer's machinery and model client (facts are opt-in), and the validators of models
the default path never validates (the other engines' configs, the fact model's, genai's
``Part``/``Content`` behind ``entries``' templates). A change that puts one of them back on the
default path fails here; ``bench/startup.py`` says what it costs. Also: a tracer provider set
after the memory was made still gets its spans.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

#: Modules the default path must not import (what ADK imported before is not longterm's).
OFF_THE_DEFAULT_PATH = (
    "numpy",
    "httpx",
    "opentelemetry.trace",
    "opentelemetry.metrics",
    "longterm.facts.distill",
    "longterm.facts.decide",
    "longterm.facts.erasure",
    "longterm.facts.maintenance",
    "longterm.facts.worker",
    "longterm.config.backends",  # the other engines' configs
)
#: Models whose validators the default path never builds (``defer_build``; genai's by model_construct).
NEVER_BUILT = (
    "longterm.config.hybrid:HybridSettings",
    "longterm.config.backends:RedisConfig",
    "longterm.config.backends:OpenSearchConfig",
    "longterm.config.backends:QdrantConfig",
    "longterm.config.backends:Mem0Config",
    "longterm.facts.llm:FactsConfig",
    "longterm.sessions:Part",
    "longterm.sessions:Session",
)

BLOCK_ADK = """
import importlib.abc, sys
class NoAdk(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[:2] in (['google', 'adk'], ['google', 'genai']):
            raise ModuleNotFoundError(name, name=name)
        return None
sys.meta_path.insert(0, NoAdk())
"""


def _child(code: str, home: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LONGTERM_", "OTEL_"))}
    env["LONGTERM_HOME"] = str(home)
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=home, env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    result: dict = json.loads(out.stdout.strip().splitlines()[-1])
    return result


#: A child's run: BEFORE, then a memory saves and searches; it prints what it loaded and built
#: of the lists above, the hits, and the value of AFTER.
PROBE = """
import importlib, json, sys
BEFORE
already = set(sys.modules)
from longterm import LongTermMemory
memory = LongTermMemory()
event = {"author": "user", "content": "I like green tea"}
memory.add_session_to_memory_sync({"id": "s", "app_name": "a", "user_id": "u", "events": [event]})
hits = memory.search_memory_sync(app_name="a", user_id="u", query="green tea").memories
memory.close_sync()
loaded = [m for m in OFF_THE_DEFAULT_PATH if m in sys.modules and m not in already]  # before the check imports
models = [name.split(":") for name in NEVER_BUILT]
built = [":".join(m) for m in models if getattr(importlib.import_module(m[0]), m[1]).__pydantic_complete__]
print(json.dumps({"loaded": loaded, "built": built, "hits": len(hits), "after": AFTER}))
"""


def _probe(before: str, after: str) -> str:
    return (
        PROBE.replace("BEFORE", before)
        .replace("AFTER", after)
        .replace("NEVER_BUILT", repr(NEVER_BUILT))
        .replace("OFF_THE_DEFAULT_PATH", repr(OFF_THE_DEFAULT_PATH))
    )


def test_with_adk_the_default_path_loads_none_of_them(tmp_path: Path) -> None:
    before = (
        "import google.adk.memory\n"
        "from google.genai import types\n"
        "genai_built = (types.Part.__pydantic_complete__, types.Content.__pydantic_complete__)"
    )
    after = "[genai_built, (types.Part.__pydantic_complete__, types.Content.__pydantic_complete__)]"
    out = _child(_probe(before, after), tmp_path)
    assert out["hits"] == 1
    assert out["loaded"] == [] and out["built"] == []
    was, now = out["after"]
    assert now == was  # entries' templates built neither genai validator


def test_without_adk_the_default_path_loads_none_of_them(tmp_path: Path) -> None:
    out = _child(_probe(BLOCK_ADK, "__import__('longterm').HAVE_ADK"), tmp_path)
    assert out["after"] is False  # the no-ADK path ran
    assert out["hits"] == 1
    assert out["loaded"] == [] and out["built"] == []


def test_a_tracer_provider_set_after_the_memory_was_made_gets_its_spans(tmp_path: Path) -> None:
    code = """
    import json, sys
    import google.adk.memory
    from longterm import LongTermMemory
    memory = LongTermMemory()
    session = {"id": "s", "app_name": "a", "user_id": "u", "events": [{"id": "e1", "author": "user", "content": "tea"}]}
    memory.add_session_to_memory_sync(session)
    quiet = "opentelemetry.trace" not in sys.modules
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    trace.set_tracer_provider(provider)
    session["events"].append({"id": "e2", "author": "user", "content": "more tea"})
    memory.add_session_to_memory_sync(session)
    memory.search_memory_sync(app_name="a", user_id="u", query="tea")
    memory.close_sync()
    print(json.dumps({"quiet": quiet, "spans": sorted(s.name for s in spans.get_finished_spans())}))
    """
    out = _child(code, tmp_path)
    assert out["quiet"]  # the first save, with nothing listening, left the API unimported
    assert {"longterm.save", "longterm.search"} <= set(out["spans"])
