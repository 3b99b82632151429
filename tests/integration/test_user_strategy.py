"""A strategy written by a user, on the public API alone, run through a real agent graph.

`KeepLastResults` is the README's example: the newest results of one tool stay whole whatever
else the build prunes or compacts. It is placed in an explicit strategy list, before the
strategies that edit.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from langgraph_ctx import (
    Compaction,
    ContextMemory,
    DropMemory,
    PromptView,
    PruneToolOutputs,
    SlidingWindow,
    Strategy,
)
from langgraph_ctx.messages import get_tag
from tests.integration._agents import ScriptedChatModel


@dataclass(frozen=True)
class KeepLastResults:
    """Keep the newest `keep` results of one tool whole: pruning and compaction skip them."""

    tool: str
    keep: int = 1

    def apply(self, view: PromptView) -> None:
        results = [m for m in view.window() if isinstance(m, ToolMessage) and m.name == self.tool]
        view.protect(m.id for m in results[len(results) - self.keep :])


def _output(kind: str, n: int) -> str:
    lines = [
        f"{kind} {n}: src/module_{n}_{i}.py:{i * 7}: def handler_{i}(request):" for i in range(60)
    ]
    return "\n".join(lines)


@tool
def grep(pattern: str) -> str:
    """Search the code base."""
    return _output("grep", int(pattern[1:]))


@tool
def read_file(path: str) -> str:
    """Read a file."""
    return _output("file", int(path[1:]))


STEPS = [("grep", "p1"), ("read_file", "f2"), ("grep", "p3"), ("read_file", "f4"),
         ("read_file", "f5"), ("read_file", "f6")]  # fmt: skip


def _script() -> list[AIMessage]:
    calls = []
    for i, (name, arg) in enumerate(STEPS):
        key = "pattern" if name == "grep" else "path"
        calls.append(AIMessage("", tool_calls=[{"name": name, "args": {key: arg}, "id": f"c{i}"}]))
    return [*calls, AIMessage("All done.")]


def _run(strategies: list[Strategy]) -> list[list[BaseMessage]]:
    model = ScriptedChatModel(messages=iter(_script()))
    memory = ContextMemory(context_window_tokens=5_000, strategies=strategies)
    agent = create_agent(
        model, [grep, read_file], middleware=[memory.middleware()], checkpointer=InMemorySaver()
    )
    config = {"configurable": {"thread_id": "user-strategy"}}
    agent.invoke({"messages": [("user", "Find the request handlers.")]}, config)
    return model.prompts


def _newest_grep(prompt: list[BaseMessage]) -> ToolMessage | None:
    greps = [m for m in prompt if isinstance(m, ToolMessage) and m.name == "grep"]
    return greps[-1] if greps else None


def _edited(message: ToolMessage) -> bool:
    tag = get_tag(message)
    return bool(tag.get("pruned") or tag.get("compacted"))


EDITING: list[Strategy] = [
    DropMemory(),
    PruneToolOutputs(protect_turns=0),  # one long turn: its old outputs may go
    Compaction(min_chars=1_000, keep_last=0),
    SlidingWindow(),
]


def test_a_user_strategy_keeps_the_newest_grep_result_whole() -> None:
    prompts = _run([KeepLastResults(tool="grep"), *EDITING])
    newest = [m for m in map(_newest_grep, prompts) if m is not None]
    assert newest and not any(_edited(m) for m in newest)
    # The build did edit: older outputs became placeholders around the protected one.
    assert any(_edited(m) for prompt in prompts for m in prompt if isinstance(m, ToolMessage))


def test_without_it_the_newest_grep_result_is_edited() -> None:
    prompts = _run(EDITING)
    newest = [m for m in map(_newest_grep, prompts) if m is not None]
    assert any(_edited(m) for m in newest)


@pytest.mark.parametrize("keep", [1, 2])
def test_the_strategy_is_an_ordinary_strategy(keep: int) -> None:
    assert isinstance(KeepLastResults(tool="grep", keep=keep), Strategy)
