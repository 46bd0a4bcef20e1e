"""Scripted models for the integration tests: the frameworks run for real, offline; only the model is scripted.

``openai_model(*steps)`` is the OpenAI Agents SDK's own ``ScriptedModel`` (one list of output
items a model call); ``pydantic_model()`` is a Pydantic AI ``FunctionModel`` that answers as
``longterm.testing.scripted_llm.ScriptedLlm`` does for ADK: after a tool result it says
"From memory: <the result>", a message starting ``recall:`` calls ``load_memory`` with the rest,
``remember:`` calls ``save_memory``, anything else is answered "ok".
"""

from __future__ import annotations

from typing import Any

from agents import RunResult, set_tracing_disabled
from agents.items import ToolCallOutputItem
from agents.testing import ScriptedModel, assistant_message, function_call
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

set_tracing_disabled(True)  # offline: the SDK sends no traces

__all__ = ["assistant_message", "function_call", "openai_model", "pydantic_model", "recall", "tool_outputs"]


def openai_model(*steps: list[Any]) -> ScriptedModel:
    return ScriptedModel(list(steps))


def recall(query: str, call_id: str = "c1", tool: str = "load_memory") -> list[Any]:
    """The model's step that searches memory (the answer after the tool's result is another step)."""
    return [function_call(tool, {"query": query}, call_id=call_id)]


def tool_outputs(result: RunResult) -> str:
    """Every tool output of an OpenAI Agents SDK run, as one text (an MCP tool's: its text part)."""
    outputs = [item.output for item in result.new_items if isinstance(item, ToolCallOutputItem)]
    return "\n".join(str(o["text"]) if isinstance(o, dict) and "text" in o else str(o) for o in outputs)


def _answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    parts = messages[-1].parts
    returned = next((p for p in parts if isinstance(p, ToolReturnPart)), None)
    if returned is not None:
        return ModelResponse(parts=[TextPart("From memory: " + returned.model_response_str())])
    said = next((p.content for p in parts if isinstance(p, UserPromptPart) and isinstance(p.content, str)), "")
    for prefix, tool, arg in (("recall:", "load_memory", "query"), ("remember:", "save_memory", "text")):
        if said.startswith(prefix):
            return ModelResponse(parts=[ToolCallPart(tool, {arg: said[len(prefix) :].strip()})])
    return ModelResponse(parts=[TextPart("ok")])


def pydantic_model() -> FunctionModel:
    return FunctionModel(_answer)
