"""Long runs among other middleware: every window is passed, and every run ends normally.

The composition matrix (`test_composition.py`) runs a few turns; with outputs excerpted as they
arrive its prompts never pass a small window, so it cannot see what happens when they do. These
runs read until the history is several times the primary model's window, in both middleware
orders, sync and async, with:

* a fallback to a model with 1/2 and 1/8 of the primary's window (another class, so the guard
  counts it with its own counter), the primary failing for good from its first prompt over the
  fallback's window: the fallback's first call is refused once and rebuilt, never again;
* a model whose `bind_tools` returns the model itself (the tools never show in the call);
* a middleware that adds 1,500 tokens to the system prompt of every call.

Each run must end with the agent's last answer, and no prompt any model received may be over
that model's window (counted as the fake provider bills: gpt-4o's tokenizer, tools included).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, ModelFallbackMiddleware, ModelRequest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.tools import StructuredTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from langgraph_ctx import ContextMemory
from langgraph_ctx.prompt.render import references_recall
from langgraph_ctx.scripted import ScriptedChatModel
from langgraph_ctx.tokens import get_counter
from tests.providers import provider_problems

COUNTER = get_counter("gpt-4o")
PRIMARY_WINDOW = 8_000
READS = 90
"""Reads of about 500 tokens: the history passes every window several times."""
SUMMARY = "<completed>read the chunks</completed><remaining>answer</remaining>"


@tool
def read_chunk(index: int) -> str:
    """Read one chunk of the log (about 500 tokens)."""
    return "\n".join(
        f"chunk {index} line {j}: request {index * 100 + j} served by worker-{j % 7} in {j}ms"
        for j in range(28)
    )


def reader(thinking: bool = False) -> Any:
    """Read chunk after chunk, then answer; the same replies whatever the prompt.

    `thinking`: each turn also reasons over several lines (a turn long enough to be shown
    shortened, with a `recall` reference to the whole turn).
    """
    done = itertools.count()

    def step(prompt: list[BaseMessage]) -> AIMessage:
        n = next(done)
        if n >= READS:
            return AIMessage("All chunks read.")
        call = {"name": "read_chunk", "args": {"index": n}, "id": f"c-{uuid.uuid4().hex[:8]}"}
        text = f"Reading chunk {n}."
        if thinking:
            text = "\n".join(
                f"Step {n}.{k}: the latency of worker-{k} looks normal so far." for k in range(20)
            )
        return AIMessage(text, tool_calls=[call])

    return itertools.repeat(step)


class GoesDown(ScriptedChatModel):
    """A primary that fails for good from the first prompt over `down_above` tokens on.

    The worst moment for an outage: the prompts built for this model's window no longer fit
    the fallback's, so the fallback's first call is refused and rebuilt (a fixed call number
    would land wherever the defaults happen to have cut the prompt).
    """

    down_above: int = 0
    down: bool = False

    def _step(self, prompt: list[BaseMessage], *, parse: bool = True) -> Any:
        if self.down or COUNTER(prompt) > self.down_above:
            self.down = True
            raise RuntimeError("503 overloaded")
        return super()._step(prompt, parse=parse)


class Backup(ScriptedChatModel):
    """Another model class: the guard identifies the fallback apart from the primary."""


class HidesBindings(ScriptedChatModel):
    """A chat model whose `bind_tools` returns itself: the call's parameters carry no tools."""

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        return self


class Padding(AgentMiddleware[Any, Any]):
    """Adds 1,500 tokens (gpt-4o's tokenizer) to the system prompt of every call."""

    PAD = " ".join(f"rule-{i}: be careful." for i in range(214))

    def wrap_model_call(self, request: ModelRequest[Any], handler: Any) -> Any:
        return handler(request.override(system_message=self._padded(request)))

    async def awrap_model_call(self, request: ModelRequest[Any], handler: Any) -> Any:
        return await handler(request.override(system_message=self._padded(request)))

    def _padded(self, request: ModelRequest[Any]) -> SystemMessage:
        base = request.system_message.text if request.system_message else ""
        return SystemMessage(f"{base}\n{self.PAD}")


def model(
    cls: type[ScriptedChatModel], window: int, thinking: bool = False, **options: Any
) -> ScriptedChatModel:
    return cls(
        messages=reader(thinking),
        profile={"max_input_tokens": window},
        usage_counter=COUNTER,
        **options,
    )


@dataclass
class Run:
    models: list[ScriptedChatModel]
    middleware: list[Any]
    summarizer: ScriptedChatModel | None = field(
        default_factory=lambda: ScriptedChatModel(fallback=SUMMARY)
    )


def scenario(name: str) -> Run:
    if name.startswith("fallback"):
        share = {"fallback_half": 2, "fallback_eighth": 8}[name]
        # The primary serves until its prompt first passes the fallback's window, then fails
        # for good.
        primary = model(GoesDown, PRIMARY_WINDOW * share // 2, down_above=PRIMARY_WINDOW // 2)
        backup = model(Backup, PRIMARY_WINDOW // 2)
        return Run([primary, backup], [ModelFallbackMiddleware(backup)])
    if name == "hidden_bindings":
        # Long turns, shown shortened with a reference to the whole turn, and the
        # deterministic summary, which copies the turns' text (and cuts it short).
        return Run([model(HidesBindings, PRIMARY_WINDOW, thinking=True)], [], summarizer=None)
    if name == "padding":
        return Run([model(ScriptedChatModel, PRIMARY_WINDOW)], [Padding()])
    raise AssertionError(name)


def run(name: str, order: str, use_async: bool) -> tuple[Run, dict[str, Any], list[BaseMessage]]:
    case = scenario(name)
    memory = ContextMemory(model=case.models[0], summarizer=case.summarizer)
    ours = memory.middleware()
    stack = [ours, *case.middleware] if order == "ours_first" else [*case.middleware, ours]
    agent = create_agent(
        case.models[0],
        [read_chunk],
        system_prompt="You read log chunks for the user.",
        middleware=stack,
        checkpointer=InMemorySaver(),
        store=InMemoryStore(),
    )
    config: Any = {"configurable": {"thread_id": "t"}, "recursion_limit": 4 * READS}
    task = {"messages": [HumanMessage("Read every chunk of the log, then tell me you are done.")]}
    asyncio.run(agent.ainvoke(task, config)) if use_async else agent.invoke(task, config)
    # The ledger is private state: in the checkpoint, not in what invoke returns.
    state = agent.get_state(config).values
    return case, state, memory.get_full_history(agent, config)


CASES = [
    pytest.param(name, order, use_async, id=f"{name}-{order}-{'async' if use_async else 'sync'}")
    for name in ("fallback_half", "fallback_eighth", "hidden_bindings", "padding")
    for order in ("ours_first", "ours_last")
    for use_async in (False, True)
]


@pytest.mark.parametrize(("name", "order", "use_async"), CASES)
def test_a_long_run_ends_normally_and_every_call_fits(
    name: str, order: str, use_async: bool, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    case, state, history = run(name, order, use_async)
    # LangChain logs each refusal the guard raises in its callback.
    refusals = [r for r in caplog.records if "refused a model call" in r.getMessage()]
    assert state["messages"][-1].content == "All chunks read."
    windows = [m.profile["max_input_tokens"] for m in case.models if m.profile]
    assert COUNTER(history) > max(windows) and COUNTER(history) > 6 * min(windows)
    for m in case.models:
        window = m.profile["max_input_tokens"] if m.profile else 0
        for n, (prompt, tools) in enumerate(zip(m.prompts, m.prompt_tools, strict=True), 1):
            tokens = COUNTER(prompt) + COUNTER.count_tools(tools)
            assert tokens <= window, f"{type(m).__name__} call {n}: {tokens} > {window}"
            assert provider_problems(prompt) == []
    if name.startswith("fallback"):
        primary, backup = case.models
        assert len(backup.prompts) > 40, "the fallback carried the second half of the run"
        # The outage came with a prompt over the fallback's window: the first fallback call
        # had a prompt built for a window it does not have (refused, rebuilt, then sent).
        first_failed = next(p for p in primary.prompts if COUNTER(p) > PRIMARY_WINDOW // 2)
        assert primary.prompts.index(first_failed) > 5, "the primary served a while"
        if order == "ours_first":  # ours builds, the fallback inside calls a smaller model
            called = state["context_ledger"]["called"]
            assert called["window"] == PRIMARY_WINDOW // 2, "the guard learned its window"
            # Refused once, rebuilt for the fallback; the next builds are made for it.
            assert len(refusals) == 1, [r.getMessage() for r in refusals]
        else:  # ours sees the fallback in the request and builds for it
            assert refusals == []
    if name == "hidden_bindings":
        (hiding,) = case.models
        assert not any(references_recall(p) for p in hiding.prompts[-20:])


def replay_through_agent(messages: list[BaseMessage], window: int) -> HidesBindings:
    """A recorded run replayed through `create_agent` by a model that hides its bindings.

    The model answers with the recorded AI messages in order; each tool answers with its
    recorded outputs in order. The deterministic summary stands in for a summarizer.
    """
    outputs: dict[str, list[Any]] = {}
    for m in messages:
        if isinstance(m, ToolMessage):
            outputs.setdefault(m.name or "tool", []).append(m.content)
    replies = iter([m for m in messages if isinstance(m, AIMessage)])

    def step(prompt: list[BaseMessage]) -> AIMessage:
        recorded = next(replies, None)
        if recorded is None:
            return AIMessage("All chunks read.")
        return AIMessage(recorded.content, tool_calls=recorded.tool_calls)

    def recorded_tool(name: str) -> StructuredTool:
        pending = iter(outputs.get(name, []))
        return StructuredTool.from_function(
            lambda **_: next(pending, "ok"),
            name=name,
            description=f"The recorded {name} tool.",
            args_schema={"type": "object", "properties": {}, "additionalProperties": True},
        )

    names = sorted({c["name"] for m in messages if isinstance(m, AIMessage) for c in m.tool_calls})
    hiding = HidesBindings(
        messages=itertools.repeat(step), profile={"max_input_tokens": window}, usage_counter=COUNTER
    )
    memory = ContextMemory(model=hiding)
    system = next((m.text for m in messages if isinstance(m, SystemMessage)), "You help.")
    agent = create_agent(
        hiding,
        [recorded_tool(n) for n in names],
        system_prompt=system,
        middleware=[memory.middleware()],
        checkpointer=InMemorySaver(),
        store=InMemoryStore(),
    )
    task = next(m for m in messages if isinstance(m, HumanMessage))
    config: Any = {"configurable": {"thread_id": "t"}, "recursion_limit": 1_000}
    state = agent.invoke({"messages": [task]}, config)
    assert state["messages"][-1].content == "All chunks read."
    return hiding


@pytest.mark.trajectories
def test_a_recorded_run_with_hidden_bindings_ends_normally(
    trajectories: dict[str, list[BaseMessage]],
) -> None:
    """The field report: after 96 calls a summary that copied a shortened turn's `recall`
    note, cut short, was refused again and again, and the run ended with a window error."""
    hiding = replay_through_agent(
        trajectories["mini-deepseek-chat__pylint-dev__astroid-1333"], 8_000
    )
    assert len(hiding.prompts) > 100
    for n, (prompt, tools) in enumerate(zip(hiding.prompts, hiding.prompt_tools, strict=True), 1):
        assert COUNTER(prompt) + COUNTER.count_tools(tools) <= 8_000, f"call {n}"
        assert not references_recall(prompt), f"call {n} names recall, which is not bound"
