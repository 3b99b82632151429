"""Provider built-in tools (`{"type": "web_search_preview"}`) are counted, not refused."""

from __future__ import annotations

import pytest
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.tools import tool

from langgraph_ctx.pipeline import ContextManager
from langgraph_ctx.prompt.report import ContextBudget
from langgraph_ctx.tokens import ApproximateCounter, TiktokenCounter

BUILT_IN = {"type": "web_search_preview"}


@tool
def lookup(query: str) -> str:
    """Look a thing up."""
    return query


@pytest.mark.parametrize(
    "counter", [TiktokenCounter("gpt-4o"), ApproximateCounter()], ids=["exact", "approximate"]
)
def test_a_built_in_tool_is_counted_beside_function_tools(counter: object) -> None:
    count_tools = counter.count_tools  # type: ignore[attr-defined]
    alone = count_tools([BUILT_IN])
    assert alone > 0
    assert count_tools([lookup, BUILT_IN]) > count_tools([lookup])


def test_a_build_with_a_built_in_tool_fits_and_counts_it() -> None:
    messages = [SystemMessage("You search the web."), HumanMessage("What is new?", id="h1")]
    cm = ContextManager(budget=ContextBudget(context_window_tokens=8_000))
    plain = cm.build(messages, tools=[lookup])
    with_search = cm.build(messages, tools=[lookup, BUILT_IN])
    assert with_search.report.tokens > plain.report.tokens
