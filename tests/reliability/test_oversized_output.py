"""The newest tool output larger than the window is compacted, not fatal (issue 13 item 5).

With the default strategies (`PruneToolOutputs(protect_turns=2)`, `Compaction(keep_last=3)`,
`SlidingWindow`) and an archive, a tool output that alone does not fit the window is written
to the archive and shown as its reference and preview, so the call goes on and `recall` can
read it back; an output that fits stays whole.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from langgraph_ctx import ContextManager, ContextMemory
from langgraph_ctx.archive import Archive
from langgraph_ctx.archive._backends import StoreBackend
from langgraph_ctx.messages import text_of, validate_messages
from langgraph_ctx.strategies import (
    Compaction,
    DropMemory,
    PruneToolOutputs,
    SlidingWindow,
    default_strategies,
)
from tests.conftest import run
from tests.fakes import ScriptedChatModel
from tests.integration._agents import adrive, drive

WORDS = ["lorem", "ipsum", "dolor", "sit", "amet", "consectetur", "adipiscing", "elit", "sed", "do"]


def huge_text(tokens: int) -> str:
    """At least `tokens` tokens of varied text (a word and a number: about two tokens each)."""
    words = [f"{WORDS[i % len(WORDS)]}{i % 97}" for i in range(tokens // 2)]
    return "\n".join(" ".join(words[i : i + 12]) for i in range(0, len(words), 12))


def history(output_tokens: int) -> list[BaseMessage]:
    call = {"name": "fetch", "args": {"url": "https://example.com/big"}, "id": "call_big"}
    return [
        HumanMessage("Fetch the page and tell me what it says.", id="h1"),
        AIMessage("", tool_calls=[call], id="ai1"),
        ToolMessage(huge_text(output_tokens), tool_call_id="call_big", name="fetch", id="t1"),
    ]


def manager(window: int, *, on_arrival: bool = True) -> tuple[ContextManager, Archive]:
    archive = Archive(StoreBackend(InMemoryStore()), thread_id=f"t-{uuid.uuid4().hex[:8]}")
    strategies = default_strategies()
    if not on_arrival:  # compaction over the trigger only (keep_last protects the newest)
        strategies = [DropMemory(), PruneToolOutputs(), Compaction(), SlidingWindow(summarize=True)]
    return ContextManager(
        context_window_tokens=window, strategies=strategies, archive=archive
    ), archive


@pytest.mark.parametrize("output_tokens", [40_000, 1_200_000])
async def test_newest_output_over_the_window_is_compacted(mode: str, output_tokens: int) -> None:
    """A 40k- or 1.2M-token newest output at a 32k window: compacted, recallable, no error."""
    cm, archive = manager(32_000)
    messages = history(output_tokens)
    result = await run(mode, cm.build, cm.abuild, messages)
    assert result.report.ok and result.report.tokens <= cm.budget.limit
    assert validate_messages(result.messages) == []
    compacts = [d for d in result.report.decisions if d.kind == "compact"]
    assert compacts and compacts[-1].message_ids == ["t1"]
    shown = result.messages[-1]
    assert isinstance(shown, ToolMessage) and shown.tool_call_id == "call_big"
    assert 'recall(ref="t1")' in text_of(shown)
    for key in ("t1", compacts[-1].detail["refs"][0]):  # by the id it shows, and by reference
        assert text_of(archive.restore(key)) == text_of(messages[-1])


async def test_newest_output_that_fits_stays_whole(mode: str) -> None:
    """Under the limit the newest outputs keep their protection (`keep_last`) when outputs are
    compacted over the trigger only; the defaults compact it as it arrives (issue 16)."""
    cm, _ = manager(32_000, on_arrival=False)
    messages = history(20_000)
    result = await run(mode, cm.build, cm.abuild, messages)
    assert result.report.ok
    assert text_of(result.messages[-1]) == text_of(messages[-1])
    assert all(d.kind != "compact" for d in result.report.decisions)
    cm, archive = manager(32_000)
    result = await run(mode, cm.build, cm.abuild, messages)
    assert result.report.ok and 'recall(ref="t1")' in text_of(result.messages[-1])
    assert text_of(archive.restore("t1")) == text_of(messages[-1])


async def test_older_history_goes_before_the_newest_output_is_compacted(mode: str) -> None:
    """A newest output that fits once older turns leave the window stays whole (compaction
    over the trigger only)."""
    cm, _ = manager(32_000, on_arrival=False)
    old = [
        m
        for n in range(6)
        for m in (
            HumanMessage(f"Question {n}: {huge_text(3_000)}", id=f"oh{n}"),
            AIMessage(f"Answer {n}.", id=f"oa{n}"),
        )
    ]
    messages = old + history(15_000)
    result = await run(mode, cm.build, cm.abuild, messages)
    assert result.report.ok
    assert text_of(result.messages[-1]) == text_of(messages[-1])


@tool
def fetch(url: str) -> str:
    """Fetch a web page."""
    return huge_text(40_000)


async def test_agent_survives_a_tool_output_over_the_window(mode: str) -> None:
    """A `create_agent` graph whose tool returns 40k tokens at a 32k window: the run goes on;
    the model sees the reference and the full history keeps the output whole."""
    call = {"name": "fetch", "args": {"url": "https://example.com"}, "id": "call_f"}
    model = ScriptedChatModel(
        messages=iter([AIMessage("", tool_calls=[call], id="ai1"), AIMessage("Done.", id="ai2")])
    )
    memory = ContextMemory(context_window_tokens=32_000, archive=InMemoryStore())
    agent = create_agent(
        model, [fetch], middleware=[memory.middleware()], checkpointer=InMemorySaver()
    )
    config: Any = {"configurable": {"thread_id": f"t-{uuid.uuid4().hex[:8]}"}}
    await run(mode, drive, adrive, agent, ["Fetch the page."], config)
    assert len(model.prompts) == 2
    last = model.prompts[-1]
    assert validate_messages(last) == []
    assert memory.manager.token_counter(last) <= memory.manager.budget.limit
    assert "recall" in text_of(last[-1])
    full = memory.get_full_history(agent, config)
    assert text_of(full[-2]) == huge_text(40_000)


@pytest.mark.trajectories
def test_real_swe_run_at_8k_keeps_going(trajectories: dict[str, list[BaseMessage]]) -> None:
    """A real SWE-bench run (an 11.7k-token output) replayed at an 8k window: every build fits."""
    messages = trajectories["mini-gemini3pro__pylint-dev__pylint-6528"]
    cm, _ = manager(8_000)
    state: dict[str, Any] | None = None
    builds = 0
    for end in range(2, len(messages) + 1):
        if not isinstance(messages[end - 1], ToolMessage | HumanMessage):
            continue  # the model is called after a tool result or a user message
        result = cm.build(messages[:end], state=state)
        assert result.report.ok, result.report.error
        state = result.state
        builds += 1
    assert builds > 50
