"""The fact layer's model: any OpenAI-compatible chat endpoint, asked for JSON.

The seam: ``FactsConfig`` (base URL, key, model, deadline, batch size, prompts; from
arguments or ``LONGTERM_FACTS_*``) and ``await ChatModel(config).ask(system, task) -> dict``,
which returns the JSON object the model answered or raises ``ModelError``.

The prompts: ``DISTIL_PROMPT`` is the one call a batch costs (``combined``, the default): the
model reads the events and the held facts they may touch, and proposes facts each with its
decision. ``EXTRACT_PROMPT`` and ``RECONCILE_PROMPT`` are the two-step form (``combined=False``,
for a model that answers the combined form badly): facts first, then one call per fact that
resembles a held one; the combined path asks ``RECONCILE_PROMPT`` too, for a proposal its
answer gave no decision.

Why async (httpx's async client, the ``facts`` extra): the fact layer calls it on its own
worker loop, never on a caller's, and a deadline on a coroutine bounds the whole call, from
connecting to the answer's last byte (httpx's own timeouts bound each read: a model that
sends a byte at a time would hold a call for ever). Every failure a model has (unreachable,
slow, 429, 5xx, an answer that is not JSON, nested too deep, too long or of the wrong shape)
is one ``ModelError``: the caller's answer is the same for all of them, retry later.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..config import env
from ..errors import BackendUnavailableError, ConfigurationError, require

#: Events per extraction call: one call reads this many saved events.
DEFAULT_BATCH = 40

EXTRACT_PROMPT = """You distil durable facts from a conversation between a user and an assistant.
The user message is JSON: {"task": "extract", "events": [{"id", "role", "time", "text"}]}, oldest first.
Return JSON only: {"facts": [{"subject": ..., "text": ..., "evidence": [event ids]}]}.
- A fact is lasting information worth remembering across conversations: where the user lives, works,
  what they eat, like, own, plan; one statement per fact, in the third person ("The user lives in Lisbon").
- "subject" is whom the fact is about: "user" for the user; for anyone else a short name for them as the
  user knows them ("user's brother", "Maria"). A statement about another person is never a fact about the user.
- Take facts from what the user says; the assistant's turns are context only.
- "evidence" lists the ids of the events that state the fact.
- Small talk, questions and passing moods are not facts. No facts: {"facts": []}."""

RECONCILE_PROMPT = """You keep a user's facts current.
The user message is JSON: {"task": "reconcile", "new": {"subject", "text"}, "existing": [{"ref", "subject",
"text", "since"}]}: a newly learned fact and the most similar facts already held.
Return JSON only: {"decision": "ADD" | "UPDATE" | "DELETE" | "NOOP", "target": ref or null, "text": ...}.
- NOOP: an existing fact already says the same (target: that fact).
- UPDATE: the new fact replaces an existing one that it contradicts or refines (target: the old fact;
  "text": the fact as it now stands).
- DELETE: the new fact says an existing one is no longer true, with nothing to replace it (target: it).
- ADD: anything else. First compare the subjects: a fact about another person (the user's brother, a
  friend) never updates or deletes a fact about the user, however similar the words; that is an ADD."""

DISTIL_PROMPT = """You distil durable facts from a conversation and keep a user's facts current.
The user message is JSON: {"task": "extract", "events": ["<id> <role> <date>: <text>"], "facts": ["<ref> (<subject>):
<text>"]}: new events, oldest first (a date where it changes), and facts already held that may be related.
Return JSON only, facts in event order: {"facts": [{"subject", "text", "evidence": [event ids], "decision", "target",
"now"}]}.
- A fact is lasting information worth remembering across conversations: where the user lives, works, what they eat,
  like, own, plan; one statement per fact, in the third person ("The user lives in Lisbon"). Small talk, questions and
  passing moods are not facts. Take facts from what the user says; the assistant's turns are context only.
- "subject": whom it is about: "user", or a short name for anyone else as the user knows them ("user's brother").
- "evidence": the ids of the events that state it.
- "decision" on "target" (a held fact's ref, or n1, n2...: the first, second... fact of your answer): NOOP if the
  target says the same; UPDATE if the fact replaces it, contradicting or refining it ("now": the fact as it then
  stands, if not "text"); DELETE if it says the target is no longer true; else ADD (no target). A fact about another
  person never updates or deletes one about the user."""

CONSOLIDATE_PROMPT = """You tidy a user's facts.
The user message is JSON: {"task": "consolidate", "facts": [{"ref", "subject", "text", "since"}]}, oldest first.
Return JSON only: {"merges": [{"keep": ref, "drop": ref}]}: "drop" is a duplicate of "keep", or a fact that
"keep" (a newer fact about the same subject) contradicts. Facts about different subjects are never merged."""


class FactsConfig(BaseModel):
    """Where the fact layer's model is, and how it is used. ``LongTermMemory(facts=...)``
    takes this, a dict of its fields, or None: then the ``LONGTERM_FACTS_*`` variables.
    Built when it first validates (facts are opt-in: most memories never make one)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    base_url: str
    """OpenAI-compatible API base, e.g. ``https://api.openai.com/v1`` (``/chat/completions`` is appended)."""
    model: str
    api_key: str | None = None
    timeout: float = Field(default=30.0, gt=0)
    """Seconds one model call may take; a slower call fails and is retried later."""
    batch_events: int = Field(default=DEFAULT_BATCH, ge=1, le=500)
    retry_seconds: float = Field(default=30.0, gt=0)
    """Seconds a failed extraction waits before it is tried again (also at the next save, and on flush)."""
    json_mode: bool = True
    """Send ``response_format: json_object`` (turn off for endpoints that refuse it)."""
    combined: bool = True
    """One call a batch: the model reads the events with the held facts they may touch and
    decides as it extracts (``distil_prompt``). False: the two-step form, extraction
    (``extract_prompt``) then one reconcile call per fact that resembles a held one. A custom
    ``extract_prompt`` with the default ``distil_prompt`` means the two-step form too (see
    ``one_call``): the prompt a user wrote is the one that runs."""
    similar: int = Field(default=8, ge=1, le=50)
    """Existing facts shown to the model when it reconciles a new one (the two-step form, and
    the combined form's fallback), and searched for the same text."""
    batch_similar: int = Field(default=20, ge=1, le=200)
    """Held facts shown with a batch's events in the combined call: those its events' words
    find first, then the user's others."""
    profile_chars: int = Field(default=2000, ge=100)
    distil_prompt: str = DISTIL_PROMPT
    extract_prompt: str = EXTRACT_PROMPT
    reconcile_prompt: str = RECONCILE_PROMPT
    consolidate_prompt: str = CONSOLIDATE_PROMPT

    @property
    def one_call(self) -> bool:
        """Whether a batch costs one combined call: ``combined``, unless only the extraction
        prompt was customised (a prompt written for the two-step form)."""
        custom_extract_only = self.extract_prompt != EXTRACT_PROMPT and self.distil_prompt == DISTIL_PROMPT
        return self.combined and not custom_extract_only

    @staticmethod
    def resolve(value: Any) -> FactsConfig | None:
        """``value`` as a config; None (from the environment when it names a model) means off."""
        if value is False:
            return None
        if isinstance(value, FactsConfig):
            return value
        if value is None or value is True:
            base_url, model = env("LONGTERM_FACTS_BASE_URL"), env("LONGTERM_FACTS_MODEL")
            if not (base_url and model):
                if value is True:
                    raise ConfigurationError(
                        "facts=True needs a model: set LONGTERM_FACTS_BASE_URL and LONGTERM_FACTS_MODEL (and "
                        "LONGTERM_FACTS_API_KEY), or pass facts={'base_url': ..., 'model': ...}."
                    )
                return None
            return FactsConfig(base_url=base_url, model=model, api_key=env("LONGTERM_FACTS_API_KEY"))
        if isinstance(value, dict):
            try:
                return FactsConfig.model_validate({"api_key": env("LONGTERM_FACTS_API_KEY"), **value})
            except ValidationError as exc:
                problems = "; ".join(f"'{'.'.join(map(str, e['loc']))}': {e['msg']}" for e in exc.errors())
                known = ", ".join(FactsConfig.model_fields)
                raise ConfigurationError(f"invalid facts setting {problems}. Known keys: {known}.") from None
        raise ConfigurationError(
            f"facts must be a dict, a FactsConfig, True, False or None, not {type(value).__name__}."
        )


class ModelError(BackendUnavailableError):
    """The fact model did not give a usable answer (unreachable, slow, 429, 5xx, not JSON,
    nested too deep, too long, the wrong shape): retried later, never skipped."""


#: Deepest nesting an answer may have: the fact layer's answers are three levels deep, and
#: a deeper one would be refused by ``json`` or by anything walking it recursively later.
MAX_DEPTH = 32
#: Longest answer read (bytes): a batch's extraction is a few kilobytes.
MAX_ANSWER_BYTES = 4_000_000

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


def parse_json(content: str) -> dict[str, Any]:
    """The JSON object in a model's answer (bare, in a code fence, or amid prose)."""
    fenced = _FENCE.search(content)
    text = fenced.group(1) if fenced else content
    start, end = text.find("{"), text.rfind("}")
    value = load_json(text[start : end + 1], "the fact model's answer") if start >= 0 else None
    if not isinstance(value, dict):
        raise ModelError(f"the fact model answered something that is not a JSON object: {content[:200]!r}")
    return value


def load_json(text: str | bytes, what: str) -> Any:
    """``text`` as JSON, or ``ModelError``: not JSON, or nested deeper than ``MAX_DEPTH``."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise ModelError(f"{what} is nested too deep to read (more than {MAX_DEPTH} levels)") from None
    except ValueError:  # JSONDecodeError, and bytes that are not UTF-8
        raise ModelError(f"{what} is not JSON: {text[:200]!r}") from None
    if depth_over(value, MAX_DEPTH):
        raise ModelError(f"{what} is nested too deep to use (more than {MAX_DEPTH} levels)")
    return value


def depth_over(value: Any, limit: int) -> bool:
    """Is ``value`` (parsed JSON) nested deeper than ``limit``? Walked without recursion."""
    todo = [(value, 1)]
    while todo:
        item, depth = todo.pop()
        if isinstance(item, (dict, list)):
            if depth > limit:
                return True
            todo.extend((v, depth + 1) for v in (item.values() if isinstance(item, dict) else item))
    return False


class ChatModel:
    """One endpoint and model, used on one event loop (the fact worker's). ``usage`` sums calls
    and tokens (as the endpoint reports them)."""

    def __init__(self, config: FactsConfig) -> None:
        self.config = config
        headers = {"Authorization": f"Bearer {config.api_key}"} if config.api_key else {}
        self._httpx = require("httpx", package="httpx", extra="facts", purpose="The fact layer")
        self._http = self._httpx.AsyncClient(timeout=config.timeout, headers=headers)
        self._url = config.base_url.rstrip("/") + "/chat/completions"
        self._where = f"the fact model {config.model!r} at {config.base_url}"
        self.usage = {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0}

    async def ask(self, system: str, task: dict[str, Any]) -> dict[str, Any]:
        """The JSON object the model answers to ``task``; the whole call, from connecting to the
        answer's last byte, within ``timeout`` seconds; every failure a ``ModelError``."""
        body: dict[str, Any] = {
            "model": self.config.model,
            "temperature": 0,
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": json.dumps(task, ensure_ascii=False)},
            ],
        }
        if self.config.json_mode:
            body["response_format"] = {"type": "json_object"}
        try:
            status, raw = await asyncio.wait_for(self._post(body), self.config.timeout)
        except (asyncio.TimeoutError, self._httpx.TimeoutException):
            raise ModelError(f"{self._where} did not answer within {self.config.timeout:g} s") from None
        except self._httpx.HTTPError as exc:
            raise ModelError(f"{self._where} is unreachable ({type(exc).__name__}: {exc})") from None
        text = raw.decode("utf-8", "replace")
        if status != 200:
            raise ModelError(f"{self._where} answered HTTP {status}: {text[:200]}")
        return self._content(load_json(raw, f"{self._where}'s reply"), text)

    async def _post(self, body: dict[str, Any]) -> tuple[int, bytes]:
        """POST ``body``; the status and the reply, read in chunks up to ``MAX_ANSWER_BYTES``."""
        async with self._http.stream("POST", self._url, json=body) as reply:
            data = bytearray()
            async for chunk in reply.aiter_bytes():
                data += chunk
                if len(data) > MAX_ANSWER_BYTES:
                    raise ModelError(f"{self._where} answered more than {MAX_ANSWER_BYTES:,} bytes; refused")
            return reply.status_code, bytes(data)

    def _content(self, data: Any, text: str) -> dict[str, Any]:
        """The JSON object in a chat completion's first message; usage counted."""
        try:
            content = data["choices"][0]["message"]["content"] or ""
        except (KeyError, IndexError, TypeError):
            content = None
        if not isinstance(content, str):
            raise ModelError(f"{self._where} answered something that is not a chat completion: {text[:200]!r}")
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        self.usage["calls"] += 1
        self.usage["prompt_tokens"] += _count(usage.get("prompt_tokens"))
        self.usage["completion_tokens"] += _count(usage.get("completion_tokens"))
        return parse_json(content)

    async def aclose(self) -> None:
        await self._http.aclose()


def _count(value: Any) -> int:
    """A token count as an endpoint reports it; 0 for anything that is not a count."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
