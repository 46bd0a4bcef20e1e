"""Scripted models: offline stand-ins for the LLMs in examples and tests.

The seams: ``ScriptedLlm()`` is an ADK ``BaseLlm`` that needs no network and no key, so an
agent with long-term memory can be run and tested end to end (memory is real; only the
model is scripted). ``ScriptedChat(rules)`` is an OpenAI-compatible chat endpoint on
127.0.0.1 for the fact layer (``longterm.facts``): realistic answers from a few rules, and
on demand the failures a real endpoint has (429, 5xx, timeouts, malformed JSON).

Each turn ``ScriptedLlm`` looks at the request: after a function response it answers
"From memory: <the response>"; when the user's message starts with ``recall:`` it calls
``load_memory`` with the rest as the query; otherwise it says "ok". ``ScriptedChat`` needs
no ADK, but lives here beside it, so importing this module needs the ``adk`` extra.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types

_USAGE = types.GenerateContentResponseUsageMetadata(prompt_token_count=0, candidates_token_count=0, total_token_count=0)


class ScriptedLlm(BaseLlm):
    model: str = "scripted"

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        last = llm_request.contents[-1] if llm_request.contents else None
        parts = last.parts if last and last.parts else []
        fr = next((p.function_response for p in parts if p.function_response), None)
        if fr is not None:
            text = "From memory: " + json.dumps(fr.response, ensure_ascii=False, default=str)
            yield LlmResponse(usage_metadata=_USAGE, content=types.Content(role="model", parts=[types.Part(text=text)]))
            return
        said = " ".join(p.text for p in parts if p.text) if last and last.role == "user" else ""
        if said.startswith("recall:"):
            call = types.FunctionCall(name="load_memory", args={"query": said[len("recall:") :].strip()})
            yield LlmResponse(
                usage_metadata=_USAGE, content=types.Content(role="model", parts=[types.Part(function_call=call)])
            )
            return
        yield LlmResponse(usage_metadata=_USAGE, content=types.Content(role="model", parts=[types.Part(text="ok")]))


# -- a scripted OpenAI-compatible chat endpoint (the fact layer's model) ------------------------


@dataclass(frozen=True)
class FactRule:
    """What the scripted chat model knows: an event whose text matches ``pattern`` (a
    case-insensitive regex) states ``fact`` (``{1}``, ``{2}``: the pattern's groups) about
    ``subject``; two facts with the same ``subject`` and ``key`` contradict each other."""

    pattern: str
    fact: str
    key: str
    subject: str = "user"


class ScriptedChat:
    """An OpenAI-compatible ``/v1/chat/completions`` on 127.0.0.1 that answers the fact layer's
    tasks (``longterm.facts``) from ``FactRule``s, as a careful model would: it extracts one
    fact per matching user event, answers reconcile requests with ADD, UPDATE or NOOP by
    subject and key, and merges duplicates when asked to consolidate. An extraction that shows
    held facts (the combined call) gets each fact with the decision the reconcile request
    would have had, made against the held facts and the earlier facts of its answer as they
    then stand. ``naive=True`` models the
    failure the fact layer guards against: similarity taken for contradiction (UPDATE or merge
    on the same key whatever the subject); ``add_only=True`` a model that answers every
    reconcile request with ADD (mem0's ADD-only camp: the old and the new stay current).

    Faults: ``fail(*kinds)`` queues one per coming request: ``"429"`` (rate limited, with
    ``Retry-After``), ``"500"``, ``"malformed"`` (a reply that is not JSON), ``"deep"`` (valid
    JSON nested 10,000 levels deep), ``"long"`` (valid JSON padded past 4 MB), ``"shape"`` (a
    chat completion whose message content is a number, not text), ``"timeout"`` (answers after
    ``slow_seconds``), ``"dribble"`` (sends the headers at once, then the answer a byte every
    ``dribble_seconds``), ``"drop"`` (closes the connection unanswered), ``"ok"`` (answers: to
    fail a later request, e.g. ``fail("ok", "429")``); ``down = True`` answers every request
    with 503 until set back. ``times`` holds when each request arrived (``time.monotonic()``),
    failed ones included. ``requests`` lists the tasks
    answered (``"extract"``, ``"reconcile"``, ``"consolidate"``; a combined call answers an
    ``"extract"`` and a ``"reconcile"`` for each fact it decided against others, as the
    two-step form would have asked: ``usage["calls"]`` counts calls); ``usage`` sums the
    approximate tokens (four characters a token) of what it answered. ``gate`` (an unset
    ``threading.Event``) holds every request until it is set: a test can prove that nothing
    waits for the model. ``answer(task, fn)`` queues a hand-written answer for the next request
    of that task (``fn(task) -> dict``, the JSON the model returns): a wrong, hostile or
    contradictory model, for one call (a ``"reconcile"`` answer is also taken by the next fact
    a combined call decides against others).

    Use as a context manager; ``base_url`` is what ``LONGTERM_FACTS_BASE_URL`` takes.
    """

    def __init__(
        self,
        rules: list[FactRule],
        *,
        naive: bool = False,
        add_only: bool = False,
        slow_seconds: float = 2.0,
        dribble_seconds: float = 0.2,
    ) -> None:
        self.rules = list(rules)
        self.naive = naive
        self.add_only = add_only
        self.slow_seconds = slow_seconds
        self.dribble_seconds = dribble_seconds
        self.down = False
        self.times: list[float] = []
        self.gate: threading.Event | None = None
        self.requests: list[str] = []
        self.usage = {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0}
        self._faults: list[str] = []
        self._answers: dict[str, list[Callable[[dict[str, Any]], dict[str, Any]]]] = {}
        self._lock = threading.Lock()
        self._known: dict[str, tuple[str, str]] = {}  # fact text -> (subject, key)
        self._server: ThreadingHTTPServer | None = None

    @property
    def base_url(self) -> str:
        assert self._server is not None, "start the scripted chat first"
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def fail(self, *kinds: str) -> None:
        with self._lock:
            self._faults.extend(kinds)

    def answer(self, task: str, fn: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
        with self._lock:
            self._answers.setdefault(task, []).append(fn)

    def start(self) -> ScriptedChat:
        chat = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return None

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                status, headers, payload, dribble = chat._answer(body)
                if status == 0:  # drop: close without a reply
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                data = payload.encode()
                self.send_response(status)
                for k, v in {"Content-Type": "application/json", **headers}.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    if not dribble:
                        self.wfile.write(data)
                    for i in range(len(data) if dribble else 0):  # a byte at a time, each in time for a read timeout
                        self.wfile.write(data[i : i + 1])
                        self.wfile.flush()
                        time.sleep(chat.dribble_seconds)
                except OSError:  # the client gave up (a timeout): as a real server, carry on
                    self.close_connection = True

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, name="scripted-chat", daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> ScriptedChat:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- answering -------------------------------------------------------------------------

    def _answer(self, body: bytes) -> tuple[int, dict[str, str], str, bool]:
        """(status, headers, body, dribble) for one request; status 0: drop the connection."""
        with self._lock:
            self.times.append(time.monotonic())
        if self.gate is not None:
            self.gate.wait(60)
        with self._lock:
            fault = self._faults.pop(0) if self._faults else ("down" if self.down else "")
        if fault == "down":
            return 503, {}, json.dumps({"error": {"message": "the model is down", "type": "server_error"}}), False
        if fault == "500":
            return 500, {}, json.dumps({"error": {"message": "internal error", "type": "server_error"}}), False
        if fault == "429":
            error = {"error": {"message": "rate limited", "type": "requests"}}
            return 429, {"Retry-After": "1"}, json.dumps(error), False
        if fault == "drop":
            return 0, {}, "", False
        if fault == "timeout":
            time.sleep(self.slow_seconds)
        request = json.loads(body)
        prompt = request["messages"][-1]["content"]
        task = json.loads(prompt)
        with self._lock:
            scripted = self._answers.get(task["task"])
            by_hand = scripted.pop(0) if scripted else None
        asked: list[str] = []  # the reconcile tasks a combined extraction answered too
        answers: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
            "extract": lambda t: self._extract(t, asked),
            "reconcile": self._reconcile,
            "consolidate": self._consolidate,
        }
        answer = by_hand(task) if by_hand is not None else answers[task["task"]](task)
        content = _content(answer, fault)
        with self._lock:
            self.requests += [task["task"], *asked]
            tokens_in = sum(len(m["content"]) for m in request["messages"]) // 4
            self.usage["calls"] += 1
            self.usage["prompt_tokens"] += tokens_in
            self.usage["completion_tokens"] += len(content) // 4
        reply = {
            "id": f"chatcmpl-{len(self.requests)}",
            "object": "chat.completion",
            "model": request.get("model", "scripted"),
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": tokens_in, "completion_tokens": len(content) // 4},
        }
        if fault == "shape":
            reply["choices"][0]["message"]["content"] = 42
        return 200, {}, json.dumps(reply), fault == "dribble"

    def _extract(self, task: dict[str, Any], asked: list[str]) -> dict[str, Any]:
        facts = []
        for ref, role, said in _events(task["events"]):
            if role != "user":
                continue
            for rule in self.rules:
                m = re.search(rule.pattern, said, re.IGNORECASE)
                if m:
                    text = rule.fact.format(*(g or "" for g in (m.group(0), *m.groups())))
                    with self._lock:
                        self._known[text] = (rule.subject, rule.key)
                    facts.append({"subject": rule.subject, "text": text, "evidence": [ref]})
        if "facts" not in task:  # the two-step form: the facts alone
            return {"facts": facts}
        held = [m.groupdict() for m in map(_HELD.fullmatch, task["facts"]) if m]
        return {"facts": self._decide(facts, {h["ref"]: h for h in held}, asked)}

    def _decide(
        self, facts: list[dict[str, Any]], held: dict[str, dict[str, str]], asked: list[str]
    ) -> list[dict[str, Any]]:
        """``facts`` each with its decision, made as the two-step form made it: against the
        earlier facts of the answer (``n1``...), then ``held``, as they stand after the earlier
        decisions (the layer's guards kept what another person's fact would replace)."""
        fresh: dict[str, dict[str, str]] = {}
        out = []
        for i, fact in enumerate(facts, 1):
            ref, subject, text = f"n{i}", fact["subject"], fact["text"]
            existing = [*fresh.values(), *held.values()]
            same = next((o for o in existing if o["text"] == text and o["subject"] == subject), None)
            if same is not None:  # said again: the layer links it and asks nobody
                out.append({**fact, "decision": "NOOP", "target": same["ref"]})
                continue
            if not existing:  # nothing like it: the layer asked nobody either
                out.append({**fact, "decision": "ADD"})
                fresh[ref] = {"ref": ref, "subject": subject, "text": text}
                continue
            asked.append("reconcile")
            with self._lock:
                scripted = self._answers.get("reconcile")
                by_hand = scripted.pop(0) if scripted else None
            task = {"task": "reconcile", "new": {"subject": subject, "text": text}, "existing": existing}
            said = (by_hand or self._reconcile)(task)
            decision, target, now = str(said.get("decision") or "").upper(), said.get("target"), said.get("text")
            item = {**fact, "decision": decision, "target": target}
            if decision == "UPDATE" and isinstance(now, str) and now != text:
                item["now"] = now
            out.append(item)
            old = next((o for o in existing if o["ref"] == target), None)
            applied = old is not None and old["subject"] == subject and decision in ("UPDATE", "DELETE", "NOOP")
            if old is not None and applied and decision != "NOOP":
                fresh.pop(old["ref"], None)
                held.pop(old["ref"], None)
            if not applied or decision == "UPDATE":  # an ADD, or what the layer's guards turn into one
                fresh[ref] = {"ref": ref, "subject": subject, "text": item.get("now") or text}
        return out

    def _about(self, text: str) -> tuple[str, str]:
        with self._lock:
            return self._known.get(text, ("?", text))

    def _reconcile(self, task: dict[str, Any]) -> dict[str, Any]:
        subject, key = self._about(task["new"]["text"])
        if self.add_only:
            return {"decision": "ADD"}
        for old in task["existing"]:
            if old["text"] == task["new"]["text"]:
                return {"decision": "NOOP", "target": old["ref"]}
        for old in task["existing"]:
            old_subject, old_key = self._about(old["text"])
            if old_key == key and (self.naive or old_subject == subject):
                return {"decision": "UPDATE", "target": old["ref"], "text": task["new"]["text"]}
        return {"decision": "ADD"}

    def _consolidate(self, task: dict[str, Any]) -> dict[str, Any]:
        """Keep the latest fact per (subject, key) (naive: per key); the others merge into it."""

        def about(fact: dict[str, Any]) -> tuple[str, str]:
            subject, key = self._about(fact["text"])
            return ("" if self.naive else subject, key)

        latest = {about(f): f for f in task["facts"]}  # oldest first: the last one wins
        merges = [
            {"keep": latest[about(f)]["ref"], "drop": f["ref"]} for f in task["facts"] if latest[about(f)] is not f
        ]
        return {"merges": merges}


#: An event as the combined call shows it (``"e1 user 2024-05-01: text"``), and a held fact (``"f1 (user): text"``).
_EVENT = re.compile(r"(\S+) (\S+)(?: \d{4}-\d\d-\d\d)?: (.*)", re.DOTALL)
_HELD = re.compile(r"(?P<ref>\S+) \((?P<subject>.*?)\): (?P<text>.*)", re.DOTALL)


def _events(events: list[Any]) -> list[tuple[str, str, str]]:
    """(id, role, text) of each event, in either form the fact layer sends (lines or objects)."""
    out = []
    for e in events:
        if isinstance(e, dict):
            out.append((str(e["id"]), str(e.get("role") or ""), str(e["text"])))
        elif m := _EVENT.fullmatch(e):
            out.append((m[1], m[2], m[3]))
    return out


def _content(answer: dict[str, Any], fault: str) -> str:
    """The message a model sends for ``answer``: fenced JSON, or the unusable shape ``fault`` names."""
    if fault == "malformed":  # prose and JSON cut short
        return "Here you are:\n" + json.dumps(answer, ensure_ascii=False)[:-3]
    if fault == "deep":  # valid JSON no parser should follow down
        return '{"facts": ' + "[" * 10_000 + "]" * 10_000 + "}"
    if fault == "long":  # valid JSON, padded past any sane answer
        return "```json\n" + json.dumps(answer, ensure_ascii=False) + " " * 4_100_000 + "\n```"
    return "```json\n" + json.dumps(answer, ensure_ascii=False) + "\n```"
