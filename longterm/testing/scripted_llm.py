"""A scripted ADK model: an offline stand-in for the LLM in examples and tests.

The seam: ``ScriptedLlm()`` is an ADK ``BaseLlm`` that needs no network and no key, so an
agent with long-term memory can be run and tested end to end (memory is real; only the
model is scripted). Each turn it looks at the request: after a function response it
answers "From memory: <the response>"; when the user's message starts with ``recall:``
it calls ``load_memory`` with the rest as the query; otherwise it says "ok".
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator

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
