"""The hint rebuild (DESIGN part 7) on a history whose messages have no ids.

The rebuild clears the live state by id (`RemoveMessage`), so it can clear only messages that
have one. A state that does not run LangGraph's `add_messages` (a plain list reducer, messages
built by hand) can hold messages without ids: clearing the others left a torn conversation
(a model greeting whose user message was gone opened the next prompt with a made-up user
stand-in, `lgctx-conversation-start`; a tool result left without its call; the final answer
cleared while its request stayed). The rebuild now clears nothing then: the report says why,
and the next prompt opens with the real user message.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.runnables import RunnableConfig
from langgraph.store.memory import InMemoryStore

from langgraph_ctx import ContextMemory
from langgraph_ctx._effects import run_plan
from langgraph_ctx._ids import CONVERSATION_START_ID
from langgraph_ctx.messages import validate_messages

CONFIG: RunnableConfig = {"configurable": {"thread_id": "t"}}

# Which messages carry an id: all, none, or the model's only (a plain-list state whose model
# returns ids), or the shape that opened the next prompt with a stand-in.
PATTERNS = {
    "none": set(),
    "model only": {"a0", "a1", "a2"},
    "greeting without id": {"h0", "h1", "a2"},
}


def history(with_ids: set[str]) -> list[BaseMessage]:
    """A greeting turn and a tool turn whose answer reports a prompt over the threshold."""

    def i(name: str) -> str | None:
        return name if name in with_ids else None

    usage = {"input_tokens": 900, "output_tokens": 5, "total_tokens": 905}
    return [
        SystemMessage("You are a coding agent.", id=i("sys")),
        HumanMessage("Hello there", id=i("h0")),
        AIMessage("Hi! How can I help?", id=i("a0")),
        HumanMessage("Fix the bug in foo.py", id=i("h1")),
        AIMessage(
            "", tool_calls=[{"name": "read", "args": {"p": "foo.py"}, "id": "c1"}], id=i("a1")
        ),
        ToolMessage("x = 1\n" * 300, tool_call_id="c1", id=i("t1")),
        AIMessage("Fixed it.", id=i("a2"), usage_metadata=usage),  # type: ignore[arg-type]
    ]


def after_turn(
    memory: ContextMemory, messages: list[BaseMessage]
) -> tuple[list[BaseMessage], dict[str, Any]]:
    """The after-turn step, applied to `messages` as a state would: removals by id."""
    update = run_plan(memory.plan_after_turn(messages, None, CONFIG))
    gone = {m.id for m in update.get("messages", []) if isinstance(m, RemoveMessage)}
    live = [m for m in messages if m.id is None or m.id not in gone]
    return live, update.get("context_ledger") or {}


@pytest.mark.parametrize("pattern", sorted(PATTERNS))
def test_a_history_without_ids_is_not_torn_by_the_rebuild(pattern: str) -> None:
    memory = ContextMemory(context_window_tokens=1_000, archive=InMemoryStore())
    messages = history(PATTERNS[pattern])
    live, ledger = after_turn(memory, messages)
    assert live == messages, "nothing is cleared: not every message could be"
    decisions = (ledger.get("last_report") or {}).get("decisions") or []
    assert [d["kind"] for d in decisions] == ["skip"]
    reason = decisions[0]["detail"]["reason"]
    assert "no id" in reason and "add_messages" in reason, reason
    assert not (ledger.get("hint") or {}).get("text"), "no hint without a rebuild"

    nxt = [*live, HumanMessage("And now bar.py", id="h9")]
    result = run_plan(memory.plan_build(nxt, ledger, CONFIG))
    assert validate_messages(result.messages) == []
    ids = [m.id for m in result.messages]
    assert CONVERSATION_START_ID not in ids, "no made-up opener"
    first = result.messages[1]
    assert isinstance(first, HumanMessage) and first.content == "Hello there"


def test_with_ids_the_rebuild_keeps_the_final_exchange() -> None:
    """The control: the same history with ids is rebuilt, its last request and answer kept."""
    memory = ContextMemory(context_window_tokens=1_000, archive=InMemoryStore())
    messages = history({"sys", "h0", "a0", "h1", "a1", "t1", "a2"})
    live, ledger = after_turn(memory, messages)
    assert [m.id for m in live] == ["sys", "h1", "a2"]
    assert ledger["hint"]["text"]
    result = run_plan(
        memory.plan_build([*live, HumanMessage("And now bar.py", id="h9")], ledger, CONFIG)
    )
    assert validate_messages(result.messages) == []
    assert [m.id for m in result.messages][1:] == ["h1", "a2", "h9"]
    assert json.dumps(ledger["hint"]["cleared_ids"]) == json.dumps(["h0", "a0", "a1", "t1"])
