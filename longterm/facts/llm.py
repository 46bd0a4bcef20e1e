"""The fact layer's model: any OpenAI-compatible chat endpoint, asked for JSON.

The seam: ``FactsConfig`` (base URL, key, model, deadline, batch size, prompts; from
arguments or ``LONGTERM_FACTS_*``) and ``ChatModel(config).ask(system, task) -> dict``, a
blocking call that returns the JSON object the model answered or raises ``ModelError``.

Why blocking (httpx's sync client, the ``facts`` extra): the fact layer calls it from its own worker, never
from a caller's event loop, and a sync client binds to no loop. Every failure a real
endpoint has (unreachable, slow, 429, 5xx, an answer that is not JSON) is one
``ModelError``: the caller's answer is the same for all of them, retry later.
"""

from __future__ import annotations

import json
import re
import threading
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

CONSOLIDATE_PROMPT = """You tidy a user's facts.
The user message is JSON: {"task": "consolidate", "facts": [{"ref", "subject", "text", "since"}]}, oldest first.
Return JSON only: {"merges": [{"keep": ref, "drop": ref}]}: "drop" is a duplicate of "keep", or a fact that
"keep" (a newer fact about the same subject) contradicts. Facts about different subjects are never merged."""


class FactsConfig(BaseModel):
    """Where the fact layer's model is, and how it is used. ``LongTermMemory(facts=...)``
    takes this, a dict of its fields, or None: then the ``LONGTERM_FACTS_*`` variables."""

    model_config = ConfigDict(extra="forbid")

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
    similar: int = Field(default=8, ge=1, le=50)
    """Existing facts shown to the model when it reconciles a new one."""
    profile_chars: int = Field(default=2000, ge=100)
    extract_prompt: str = EXTRACT_PROMPT
    reconcile_prompt: str = RECONCILE_PROMPT
    consolidate_prompt: str = CONSOLIDATE_PROMPT

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
    """The fact model did not give a usable answer (unreachable, slow, 429, 5xx, not JSON)."""


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


def parse_json(content: str) -> dict[str, Any]:
    """The JSON object in a model's answer (bare, in a code fence, or amid prose)."""
    fenced = _FENCE.search(content)
    text = fenced.group(1) if fenced else content
    start, end = text.find("{"), text.rfind("}")
    try:
        value = json.loads(text[start : end + 1]) if start >= 0 else None
    except json.JSONDecodeError:
        value = None
    if not isinstance(value, dict):
        raise ModelError(f"the fact model answered something that is not a JSON object: {content[:200]!r}")
    return value


class ChatModel:
    """One endpoint and model; thread-safe. ``usage`` sums calls and tokens (as the endpoint reports them)."""

    def __init__(self, config: FactsConfig) -> None:
        self.config = config
        headers = {"Authorization": f"Bearer {config.api_key}"} if config.api_key else {}
        self._httpx = require("httpx", package="httpx", extra="facts", purpose="The fact layer")
        self._http = self._httpx.Client(timeout=config.timeout, headers=headers)
        self._url = config.base_url.rstrip("/") + "/chat/completions"
        self._lock = threading.Lock()
        self.usage = {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0}

    def ask(self, system: str, task: dict[str, Any]) -> dict[str, Any]:
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
        where = f"the fact model {self.config.model!r} at {self.config.base_url}"
        try:
            reply = self._http.post(self._url, json=body)
        except self._httpx.TimeoutException:
            raise ModelError(f"{where} did not answer within {self.config.timeout:g} s") from None
        except self._httpx.HTTPError as exc:
            raise ModelError(f"{where} is unreachable ({type(exc).__name__}: {exc})") from None
        if reply.status_code != 200:
            raise ModelError(f"{where} answered HTTP {reply.status_code}: {reply.text[:200]}")
        try:
            data = reply.json()
            content = data["choices"][0]["message"]["content"] or ""
        except (ValueError, KeyError, IndexError, TypeError):
            raise ModelError(
                f"{where} answered something that is not a chat completion: {reply.text[:200]!r}"
            ) from None
        usage = data.get("usage") or {}
        with self._lock:
            self.usage["calls"] += 1
            self.usage["prompt_tokens"] += int(usage.get("prompt_tokens") or 0)
            self.usage["completion_tokens"] += int(usage.get("completion_tokens") or 0)
        return parse_json(content)

    def close(self) -> None:
        self._http.close()
