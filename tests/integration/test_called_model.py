"""The budget and the counter of the model actually called, not of the configured one.

A `create_agent` agent on an OpenAI model with `ModelFallbackMiddleware` falling back to a
Claude model with a smaller window: each fallback call is counted with the Claude counter and
budgeted to the Claude window (`ContextMemory.counter_for`, `window_for`). The fake models bill
as their provider would: the OpenAI one with gpt-4o's tokenizer, the Claude one at 3.3
characters per token, and the Claude one rejects a prompt over its window.
"""

from __future__ import annotations

import asyncio
import itertools
import uuid
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import ModelFallbackMiddleware
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from langgraph_ctx import ApproximateCounter, Compaction, ContextMemory, TiktokenCounter
from langgraph_ctx.errors import ContextWindowExceededError
from langgraph_ctx.prompt.report import REPORT_KEY
from tests.conftest import make_strategies
from tests.fakes import ScriptedChatModel

PRIMARY_WINDOW = 12_000
FALLBACK_WINDOW = 5_000
SUMMARY = "<completed>read the files</completed><remaining>answer</remaining>"
FILE = " ".join(f"line {i}: the international organization documentation" for i in range(100))
CLAUDE = ApproximateCounter(provider="anthropic")


class ProviderModel(ScriptedChatModel):
    """A scripted model that names its provider and model as a real integration does."""

    provider: str = "openai"
    name_of_model: str = "gpt-4o"

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> Any:
        params = super()._get_ls_params(stop=stop, **kwargs)
        params.update(ls_provider=self.provider, ls_model_name=self.name_of_model)
        return params


def read_then_answer() -> Any:
    """Read a file, answer, and again (whatever the prompt)."""
    done = itertools.count()

    def step(prompt: list[BaseMessage]) -> AIMessage:
        if next(done) % 2:
            return AIMessage("The file says hello.")
        call = {"name": "read_file", "args": {"path": "a.txt"}, "id": f"c-{uuid.uuid4().hex[:8]}"}
        return AIMessage("", tool_calls=[call])

    return itertools.repeat(step)


@tool
def read_file(path: str) -> str:
    """Read a file."""
    return FILE


def models() -> tuple[ProviderModel, ProviderModel]:
    """The primary fails every other call, so both models serve the run."""
    primary = ProviderModel(
        messages=read_then_answer(),
        profile={"max_input_tokens": PRIMARY_WINDOW},
        usage_counter=TiktokenCounter("gpt-4o"),
        failures={n: RuntimeError("503") for n in range(1, 200, 2)},
    )
    fallback = ProviderModel(
        messages=read_then_answer(),
        provider="anthropic",
        name_of_model="claude-haiku-4-5",
        profile={"max_input_tokens": FALLBACK_WINDOW},
        usage_counter=CLAUDE,
        provider_limit=FALLBACK_WINDOW,
    )
    return primary, fallback


def run(
    primary: ProviderModel,
    fallback: ProviderModel,
    order: str = "ours_last",
    use_async: bool = False,
    **memory_options: Any,
) -> None:
    """Eight turns of reading a file and answering.

    Ours last, it sees the request the fallback middleware sends to each model; ours first,
    the fallback middleware swaps the model inside it and the call guard counts each call as
    the called model receives it (`langgraph_ctx.graph.guard`).
    """
    memory = ContextMemory(
        model=primary,
        summarizer=ScriptedChatModel(fallback=SUMMARY),
        strategies=make_strategies(summarize=True, compaction=Compaction(keep_last=1)),
        **memory_options,
    )
    stack = [ModelFallbackMiddleware(fallback), memory.middleware()]
    agent = create_agent(
        primary,
        [read_file],
        system_prompt="You read files for the user.",
        middleware=stack if order == "ours_last" else stack[::-1],
        checkpointer=InMemorySaver(),
    )
    config: Any = {"configurable": {"thread_id": "t"}, "recursion_limit": 80}
    for turn in range(8):
        turn_input = {"messages": [HumanMessage(f"Turn {turn}: what does a.txt say?")]}
        if use_async:
            asyncio.run(agent.ainvoke(turn_input, config))
        else:
            agent.invoke(turn_input, config)


def billed(model: ProviderModel) -> list[int]:
    counter = model.usage_counter
    return [
        counter(prompt) + counter.count_tools(tools)
        for prompt, tools in zip(model.prompts, model.prompt_tools, strict=True)
    ]


@pytest.mark.parametrize(
    ("order", "use_async"), [("ours_last", False), ("ours_first", False), ("ours_first", True)]
)
def test_every_call_fits_the_called_models_window(order: str, use_async: bool) -> None:
    primary, fallback = models()
    run(primary, fallback, order, use_async)
    # Both served the run (ours first, a refused fallback call is retried from the primary).
    assert len(fallback.prompts) >= 5 and len(primary.prompts) >= 8
    assert fallback.rejected == []
    assert max(billed(fallback)) <= FALLBACK_WINDOW
    assert max(billed(fallback)) > FALLBACK_WINDOW * 0.6  # the run pressed on its window
    assert max(billed(primary)) <= PRIMARY_WINDOW


def test_counter_for_follows_the_called_model() -> None:
    primary = ProviderModel()
    claude = ProviderModel(provider="anthropic", name_of_model="claude-haiku-4-5")
    memory = ContextMemory(model=primary, context_window_tokens=8_000)
    assert isinstance(memory.counter_for(primary), TiktokenCounter)
    assert memory.counter_for(None) is memory.manager.token_counter
    # Another instance of the same model counts with the configured (calibrated) counter.
    assert memory.counter_for(ProviderModel()) is memory.manager.token_counter
    counter = memory.counter_for(claude)
    assert isinstance(counter, ApproximateCounter) and counter.provider == "anthropic"
    assert memory.counter_for(claude.model_copy()) is counter  # one per family and name
    explicit = ContextMemory(model=primary, context_window_tokens=8_000, token_counter=len)
    assert explicit.counter_for(claude) is len  # a counter given by the user counts every call
    # A memory without a model counts Claude with Claude's counter, a fake with its default.
    unconfigured = ContextMemory(context_window_tokens=8_000)
    own = unconfigured.counter_for(claude)
    assert isinstance(own, ApproximateCounter) and own.provider == "anthropic"
    assert unconfigured.counter_for(ScriptedChatModel()) is unconfigured.manager.token_counter


def test_counting_the_fallback_as_the_primary_overflows_it() -> None:
    """The control: one OpenAI counter for every call under-counts the Claude calls."""
    primary, fallback = models()
    with pytest.raises(ContextWindowExceededError, match="still overflowed"):
        run(primary, fallback, token_counter=TiktokenCounter("gpt-4o"))
    assert fallback.rejected, "the fallback's prompts were counted too small"


def test_a_memory_without_a_model_counts_claude_as_claude() -> None:
    """`ContextMemory(context_window_tokens=...)` with no `model=`, in front of a Claude model
    that bills at 3.3 characters per token and rejects over its window: counted with OpenAI's
    tokenizer its prompts would be about 20% too small; counted as Claude, none is rejected."""
    _, claude = models()
    memory = ContextMemory(
        context_window_tokens=FALLBACK_WINDOW,
        summarizer=ScriptedChatModel(fallback=SUMMARY),
        strategies=make_strategies(summarize=True, compaction=Compaction(keep_last=1)),
    )
    agent = create_agent(
        claude,
        [read_file],
        system_prompt="You read files for the user.",
        middleware=[memory.middleware()],
        checkpointer=InMemorySaver(),
    )
    config: Any = {"configurable": {"thread_id": "t"}, "recursion_limit": 80}
    for turn in range(8):
        agent.invoke({"messages": [HumanMessage(f"Turn {turn}: what does a.txt say?")]}, config)
    assert claude.rejected == []
    assert max(billed(claude)) <= FALLBACK_WINDOW
    # Each report's count is Claude's (counted as gpt-4o it is about half of what Claude bills).
    reports = [
        m.response_metadata[REPORT_KEY]
        for m in memory.get_full_history(agent, config)
        if isinstance(m, AIMessage) and REPORT_KEY in m.response_metadata
    ]
    assert len(reports) >= 16
    for report in reports:
        assert report["tokens"] >= 0.95 * report["reported_tokens"], report
