"""What one model call of the middleware counts: the called model's window, the tools it gets."""

from __future__ import annotations

from langchain.agents.structured_output import ProviderStrategy, ToolStrategy
from pydantic import BaseModel

from langgraph_ctx import ContextMemory
from langgraph_ctx.graph.model_request import structured_output_tools
from langgraph_ctx.prompt.assembly import tool_name
from tests.fakes import scripted


class Answer(BaseModel):
    """The final answer."""

    text: str


def test_the_window_is_the_called_models_when_smaller() -> None:
    primary = scripted(profile={"max_input_tokens": 100_000})
    memory = ContextMemory(model=primary)
    assert memory.window_for(primary) == memory.window_for(None) == 100_000
    assert memory.window_for(scripted(profile={"max_input_tokens": 8_000})) == 8_000
    assert memory.window_for(scripted(profile={"max_input_tokens": 200_000})) == 100_000
    assert memory.window_for(scripted()) == 100_000  # no profile: the configured window
    explicit = ContextMemory(context_window_tokens=50_000)
    assert explicit.window_for(scripted(profile={"max_input_tokens": 8_000})) == 8_000


def test_the_structured_output_tool_is_counted() -> None:
    assert structured_output_tools(None) == []
    for response_format in (ToolStrategy(Answer), ProviderStrategy(Answer), Answer):
        [tool] = structured_output_tools(response_format)
        assert tool_name(tool) == "Answer"
