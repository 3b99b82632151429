"""The graphs `tests/integration/test_server.py` serves with the real LangGraph API server.

`agent` is a `create_agent` agent with `ContextMemory.middleware()`; `nodes` is a hand-built
`StateGraph(ContextState)` with `ContextMemory.node()` and `after_turn_node()`. Both run a
deterministic fake model (a `ScriptedChatModel` whose every step is a function of the prompt),
so any number of threads and runs, in any order, get the same answers:

- "read part N" -> a call to `read_log(part=N)` (a tool output of about 1,500 tokens);
- "recall" -> a call to `recall` with the first `recall(ref="...")` its prompt shows;
- "search <query>" -> a call to `search_history(query=<query>)` when the call binds that tool
  (the middleware binds it once something of the thread left the prompt), else an answer
  saying it is not bound;
- after a `search_history` result -> that result as the answer; after another tool result ->
  a short final answer.

`history` is a `create_agent` agent whose model reports its prompt tokens and whose
`ContextMemory` rebuilds after a turn past half the window, with `remove_summarized`: its
thread state keeps a few messages while the archive in the server's store holds the rest (what
`langgraph_ctx.graph.client.server_history_page` reads back for a UI).

No graph gets a checkpointer or a store: the server supplies both, and the archive must
land in the server's store (`ContextMemory` is given no `archive=`).
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
import re
import uuid
from collections.abc import Iterator
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from langgraph_ctx import Compaction, ContextMemory, ContextState
from langgraph_ctx.prompt.report import ContextBudget
from langgraph_ctx.strategies import PruneToolOutputs, SlidingWindow
from tests.fakes import ScriptedChatModel

RECALL = re.compile(r'recall\(ref="([^"]+)"\)')
BOUND: contextvars.ContextVar[frozenset[str]] = contextvars.ContextVar("bound", default=frozenset())
"""The names of the tools bound for the model call in progress (set by `Model`)."""


@tool
def read_log(part: int) -> str:
    """Read one part of the build log."""
    return "\n".join(
        f"part {part} line {i}: step {i * part} finished, cache warm, artifacts uploaded"
        for i in range(120)
    )


def step(prompt: list[BaseMessage]) -> AIMessage:
    """The model's answer to any prompt (see the module docstring)."""
    last = prompt[-1]
    call_id = f"call_{uuid.uuid4().hex[:12]}"
    if isinstance(last, ToolMessage) and last.name == "search_history":
        return AIMessage(str(last.content))
    if isinstance(last, ToolMessage):
        return AIMessage(f"Read {len(str(last.content))} characters from {last.name}.")
    text = str(last.content) if isinstance(last, HumanMessage) else ""
    if text.startswith("search "):
        if "search_history" not in BOUND.get():
            return AIMessage("search_history is not bound: nothing has left the prompt.")
        call = {"name": "search_history", "args": {"query": text[7:]}, "id": call_id}
        return AIMessage("", tool_calls=[call])
    if text.startswith("recall"):
        for message in prompt:
            found = RECALL.search(str(message.content))
            if found:
                call = {"name": "recall", "args": {"ref": found[1]}, "id": call_id}
                return AIMessage("", tool_calls=[call])
        return AIMessage("Nothing was compacted.")
    part = int(text.split()[-1]) if text.split() and text.split()[-1].isdigit() else 1
    return AIMessage("", tool_calls=[{"name": "read_log", "args": {"part": part}, "id": call_id}])


class Model(ScriptedChatModel):
    """A `ScriptedChatModel` that tells `step` which tools the call binds (`BOUND`)."""

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any) -> Any:
        with _bound(kw.get("tools")):
            return super()._generate(messages, stop, run_manager, **kw)

    async def _agenerate(
        self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> Any:
        with _bound(kw.get("tools")):
            return await super()._agenerate(messages, stop, run_manager, **kw)


@contextlib.contextmanager
def _bound(tools: Any) -> Iterator[None]:
    token = BOUND.set(frozenset(t["function"]["name"] for t in tools or ()))
    try:
        yield
    finally:
        BOUND.reset(token)


def model() -> ScriptedChatModel:
    """The fake model: `step` for every call."""
    return Model(messages=itertools.repeat(step))


def memory() -> ContextMemory:
    """Compaction without summaries, cut to 60%: placeholders stay in view for `recall`."""
    return ContextMemory(
        budget=ContextBudget(context_window_tokens=6_000, trigger=0.9, target=0.6),
        strategies=[PruneToolOutputs(), Compaction(keep_last=1), SlidingWindow()],
    )


agent = create_agent(model(), [read_log], middleware=[memory().middleware()])


def _nodes() -> Any:
    context = memory()
    tools = [read_log, context.recall_tool()]
    bound = model().bind_tools(tools)

    async def call_model(state: ContextState, config: RunnableConfig) -> dict[str, Any]:
        return {"messages": [await bound.ainvoke(state["llm_input_messages"], config)]}

    builder = StateGraph(ContextState)
    builder.add_node("context", context.node(tools=tools))
    builder.add_node("model", call_model)
    builder.add_node("tools", ToolNode(tools))
    builder.add_node("after_turn", context.after_turn_node())
    builder.add_edge(START, "context")
    builder.add_edge("context", "model")
    builder.add_conditional_edges(
        "model", tools_condition, {"tools": "tools", "__end__": "after_turn"}
    )
    builder.add_edge("tools", "context")
    builder.add_edge("after_turn", END)
    return builder.compile()


nodes = _nodes()


def _history() -> Any:
    context = ContextMemory(
        context_window_tokens=6_000,
        strategies=[SlidingWindow()],
        hint_threshold=0.5,
        remove_summarized=True,
    )
    counter = context.manager.token_counter
    scripted = ScriptedChatModel(messages=itertools.repeat(step), usage_counter=counter)
    return create_agent(scripted, [read_log], middleware=[context.middleware()])


history = _history()
