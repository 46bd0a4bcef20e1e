"""Operating it: OpenTelemetry and logs.

OpenTelemetry: the spans and metrics of a save and a search on local and on Redis, as the
SDK's in-memory exporters see them, and that neither spans, metrics nor the run's log records
carry what the user said or whose it is, unless ``LONGTERM_TELEMETRY_CONTENT=1``. Logs: an
agent whose memory cannot be searched logs one line when the outage starts and one when it
ends, not a traceback per turn."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from google.adk.sessions import InMemorySessionService
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from longterm import LongTermMemory, telemetry
from longterm.backends.local import LocalBackend
from longterm.integrations.adk import Agent, Runner
from longterm.telemetry import providers
from longterm.testing.scripted_llm import ScriptedLlm
from tests.unit.test_adk_agent import APP as ADK_APP
from tests.unit.test_adk_agent import say, tool_output

APP, USER, SESSION, EVENT = "app-q7secret", "user-k9secret", "sess-z3secret", "evt-w5secret"
#: The code in what the user said is grouped: a bare "4711" was found by chance in span ids and
#: nanosecond times (in 3 of 60 runs' telemetry), which failed the no-text test now and then.
CODE = "4711-8093-2265"
TEXT = f"My locker code is {CODE} and my dog is called Wobbleton"
INDEX = "telemetry-index"


class Otel:
    def __init__(self) -> None:
        self.spans = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    def finished(self, name: str) -> list[Any]:
        return [s for s in self.spans.get_finished_spans() if s.name == name]

    def points(self, metric: str) -> list[tuple[dict[str, Any], Any]]:
        """(attributes, point) of every data point of ``metric`` collected now."""
        data = self.reader.get_metrics_data()
        out = []
        for rm in data.resource_metrics if data else []:
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    if m.name == metric:
                        out += [(dict(p.attributes), p) for p in m.data.data_points]
        return out

    def dump(self) -> str:
        """Everything telemetry holds, as text: every span (name, attributes, events, links) and metric."""
        spans = "\n".join(s.to_json() for s in self.spans.get_finished_spans())
        data = self.reader.get_metrics_data()
        return spans + "\n" + (data.to_json() if data else "")


@pytest.fixture
def otel() -> Iterator[Otel]:
    o = Otel()
    telemetry.use(meter_provider=o.meter_provider, tracer_provider=o.tracer_provider)
    yield o
    telemetry.use()
    o.tracer_provider.shutdown()
    o.meter_provider.shutdown()


def session() -> dict[str, Any]:
    return {
        "id": SESSION,
        "app_name": APP,
        "user_id": USER,
        "events": [
            {"id": EVENT, "author": "user", "content": {"role": "user", "parts": [{"text": TEXT}]}},
            {"id": "e-agent", "author": "agent", "content": {"role": "model", "parts": [{"text": "Noted!"}]}},
        ],
    }


def config(provider: str, services: Any, tmp_path: Path) -> dict[str, Any]:
    cfg = services(provider).config(tmp_path)
    return {**cfg, "embedder": {"name": "hashing", "dim": 16}}


async def save_and_search(provider: str, services: Any, tmp_path: Path) -> list[str]:
    memory = LongTermMemory(backend=provider, backend_config=config(provider, services, tmp_path), index=INDEX)
    try:
        result = await memory.add_session_to_memory(session())
        assert result.saved == 1
        found = await memory.search_memory(app_name=APP, user_id=USER, query="locker code")
        assert [m.id for m in found.memories] == result.memory_ids
        direct = await memory.add_memory(app_name=APP, user_id=USER, memories=["Wobbleton likes the beach"])
        assert direct.saved == 1
        assert await memory.delete_memory(app_name=APP, user_id=USER, session_id=SESSION) == 1
        return result.memory_ids
    finally:
        await memory.close()


@pytest.mark.parametrize("provider", ["local", "redis"])
async def test_a_save_and_a_search_make_spans_and_metrics(
    provider: str, services: Any, tmp_path: Path, otel: Otel
) -> None:
    await asyncio.wait_for(save_and_search(provider, services, tmp_path), 60)

    saves = otel.finished("longterm.save")
    assert [s.attributes["longterm.operation"] for s in saves] == ["session", "memories"]
    first = saves[0].attributes
    assert first["longterm.backend"] == provider and first["longterm.index"] == INDEX
    assert (first["longterm.events.new"], first["longterm.events.kept"], first["longterm.events.dropped"]) == (2, 1, 1)
    [search] = otel.finished("longterm.search")
    assert search.attributes["longterm.hits"] == 1 and search.attributes["longterm.degraded"] is False
    assert set(search.attributes["longterm.arms"]) <= {"fulltext", "vector"} and search.attributes["longterm.arms"]
    [erase] = otel.finished("longterm.erase")
    assert erase.attributes["longterm.target"] == "session" and erase.attributes["longterm.deleted"] == 1

    saves_ok = {a["outcome"]: p.value for a, p in otel.points("longterm.saves") if a["backend"] == provider}
    assert saves_ok == {"ok": 2}
    events = {a["outcome"]: p.value for a, p in otel.points("longterm.events") if a["backend"] == provider}
    assert events == {"kept": 2, "dropped": 1}
    [(attrs, latency)] = otel.points("longterm.search.duration")
    assert attrs == {"backend": provider} and latency.count == 1 and 0 < latency.sum < 30


async def test_a_failed_call_is_an_error_span_and_counted_by_class(tmp_path: Path, otel: Otel) -> None:
    memory = LongTermMemory(backend_config={"path": str(tmp_path / "m.db")})
    await memory.close()
    with pytest.raises(Exception, match="closed"):
        await memory.search_memory(app_name=APP, user_id=USER, query="locker")
    [search] = otel.finished("longterm.search")
    assert search.status.status_code is trace.StatusCode.ERROR
    assert search.attributes["error.type"] == "BackendError" and not search.events  # no exception message
    [(attrs, point)] = otel.points("longterm.errors")
    assert attrs == {"backend": "local", "error.type": "BackendError"} and point.value == 1


@pytest.mark.parametrize("provider", ["local", "redis"])
async def test_no_text_and_no_ids_in_spans_metrics_or_logs(
    provider: str, services: Any, tmp_path: Path, otel: Otel, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    memory_ids = await asyncio.wait_for(save_and_search(provider, services, tmp_path), 60)
    logs = "\n".join(f"{r.name} {r.getMessage()} {json.dumps(r.__dict__, default=str)}" for r in caplog.records)
    told = otel.dump()
    assert otel.finished("longterm.save") and otel.points("longterm.saves")
    for secret in (APP, USER, SESSION, EVENT, CODE, "Wobbleton", "locker", *memory_ids):
        assert secret not in told, f"{secret!r} is in the telemetry"
        assert secret not in logs, f"{secret!r} is in the logs"


async def test_ids_only_when_switched_on(
    tmp_path: Path, otel: Otel, monkeypatch: pytest.MonkeyPatch, services: Any
) -> None:
    monkeypatch.setenv(telemetry.CONTENT_ENV, "1")
    await asyncio.wait_for(save_and_search("local", services, tmp_path), 60)
    assert otel.finished("longterm.save")[0].attributes["longterm.session_id"] == SESSION
    [search] = otel.finished("longterm.search")
    assert (search.attributes["longterm.app_name"], search.attributes["longterm.user_id"]) == (APP, USER)
    assert APP not in json.dumps([a for a, _ in otel.points("longterm.saves")])  # metric labels never
    assert telemetry.pseudonym(SESSION) == SESSION


async def test_an_auto_save_links_to_the_turn_that_scheduled_it(tmp_path: Path, otel: Otel) -> None:
    memory = LongTermMemory(backend_config={"path": str(tmp_path / "m.db")})
    saver = memory.auto_saver(min_messages=1, min_seconds=3600)
    tracer = otel.tracer_provider.get_tracer("agent")
    try:
        with tracer.start_as_current_span("turn") as turn:
            saver.notify(session())
        await asyncio.wait_for(memory.flush(), 30)
    finally:
        await memory.close()
    [auto] = otel.finished("longterm.autosave")
    assert [link.context.span_id for link in auto.links] == [turn.get_span_context().span_id]
    assert auto.parent is None  # it runs on the memory's loop, after the turn
    [save] = otel.finished("longterm.save")
    assert save.parent is not None and save.parent.span_id == auto.context.span_id


def test_backlog_gauges_report_what_is_registered(otel: Otel) -> None:
    class Owner:
        waiting = 7

    owner = Owner()
    telemetry.register_backlog("embeddings", owner, lambda o: o.waiting, backend="local")
    assert [(a, p.value) for a, p in otel.points("longterm.embeddings.backlog")] == [({"backend": "local"}, 7)]
    del owner
    assert otel.points("longterm.embeddings.backlog") == []


def test_without_the_api_the_decorators_are_the_functions(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(providers, "_API", False)
    monkeypatch.setattr(providers, "_trace", None)

    async def fn(self: Any) -> int:
        return 1

    assert telemetry.searching(fn) is fn and telemetry.saving("x")(fn) is fn and telemetry.erasing(fn) is fn
    with telemetry.span("x", backend="local") as s:
        s.set(hits=1)
    assert telemetry.link_here() is None


# -- logs --------------------------------------------------------------------------------


class Switchable(LocalBackend):
    """A local store whose search fails while ``down`` is set (a search node that went away)."""

    down = True

    def _fulltext(self, *args, **kwargs):
        if type(self).down:
            raise ConnectionError("search node on fire")
        return super()._fulltext(*args, **kwargs)


async def test_an_outage_logs_one_line_when_it_starts_and_one_when_it_ends(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    Switchable.down = True
    memory = LongTermMemory(backend=Switchable(tmp_path / "m.db"), app_name=ADK_APP)
    agent = Agent(name="assistant", model=ScriptedLlm(), long_term_memory=memory, preload_memory=True)
    sessions = InMemorySessionService()
    runner = Runner(agent=agent, app_name=ADK_APP, session_service=sessions)
    with caplog.at_level(logging.DEBUG, logger="longterm"):
        for i in range(4):
            events = await say(runner, sessions, "ra", f"s{i}", "recall: anything")
            assert "memory is unavailable" in tool_output(events)
        Switchable.down = False
        for i in range(2):
            await say(runner, sessions, "ra", f"t{i}", "recall: anything")
    await runner.close()
    loud = [r for r in caplog.records if r.levelno >= logging.WARNING and r.name.startswith("longterm.tools")]
    messages = [r.getMessage() for r in loud]
    assert len(loud) == 2, messages
    assert messages[0].startswith("load_memory: memory is unavailable, turns go on without it until it answers")
    assert messages[1].startswith("load_memory: memory answers again after")
    assert "search node on fire" in loud[0].getMessage()
    ours = [r for r in caplog.records if r.name.startswith("longterm")]
    assert not [r.getMessage() for r in ours if r.exc_info]  # no traceback (ADK's preload logs its own)
    assert "(4 calls went without it)" in loud[1].getMessage()  # 4 turns, one load_memory each
    assert loud[0].backend == "local" and loud[0].index == ADK_APP  # structured fields for JSON handlers


async def test_embedding_and_fact_distillation_have_spans_of_their_own(tmp_path: Path, otel: Otel) -> None:
    """Where a save's time goes: the embedder's calls and the fact model's batches are spans too."""
    from longterm.testing.scripted_llm import FactRule, ScriptedChat

    with ScriptedChat([FactRule(r"\bI live in (\w+)", "The user lives in {1}", "home city")]) as chat:
        facts = {"base_url": chat.base_url, "model": "scripted", "api_key": "k", "timeout": 5.0}
        memory = LongTermMemory(
            backend_config={"path": str(tmp_path / "m.db")}, embedder={"name": "hashing", "dim": 16}, facts=facts
        )
        try:
            await memory.add_session_to_memory(
                {
                    "id": "s1",
                    "app_name": APP,
                    "user_id": USER,
                    "events": [{"author": "user", "content": "I live in Porto"}],
                }
            )
            await memory.flush_facts()
            await memory.search_memory(app_name=APP, user_id=USER, query="where do I live")
        finally:
            await memory.close()
    embeds = otel.finished("longterm.embed")
    assert {s.attributes["longterm.kind"] for s in embeds} >= {"passage", "query"}
    assert all(s.attributes["longterm.backend"] == "local" and s.attributes["longterm.texts"] >= 1 for s in embeds)
    [distill, *_] = otel.finished("longterm.facts.distill")
    assert distill.attributes["longterm.records"] == 1
    assert "Porto" not in otel.dump()
