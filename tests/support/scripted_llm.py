"""A scripted ADK model: it stands in for the LLM (never for memory) in agent tests.

Each turn it looks at the request: if the last content is a function response, it
answers with that response's text; otherwise, when the user's message starts with
``recall:``, it calls ``load_memory`` with the rest as the query; else it says "ok".
"""

from __future__ import annotations

import json
from typing import AsyncGenerator

from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types


class ScriptedLlm(BaseLlm):
    model: str = "scripted"

    async def generate_content_async(self, llm_request: LlmRequest, stream: bool = False) -> AsyncGenerator[LlmResponse, None]:
        last = llm_request.contents[-1] if llm_request.contents else None
        parts = last.parts if last and last.parts else []
        fr = next((p.function_response for p in parts if p.function_response), None)
        if fr is not None:
            text = "From memory: " + json.dumps(fr.response, ensure_ascii=False, default=str)
            yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text=text)]))
            return
        said = " ".join(p.text for p in parts if p.text) if last and last.role == "user" else ""
        if said.startswith("recall:"):
            call = types.FunctionCall(name="load_memory", args={"query": said[len("recall:"):].strip()})
            yield LlmResponse(content=types.Content(role="model", parts=[types.Part(function_call=call)]))
            return
        yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text="ok")]))
