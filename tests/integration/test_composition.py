"""Composition: the middleware among LangChain's own, in both orders (ours first and ours last).

Each case builds a `create_agent` agent with `ContextMiddleware` and one other middleware (or
feature), drives a few turns that each read a large file, and checks every call the agent's
models received: the prompt AND the tools sent fit the window of the model that was called
(a fallback model has a smaller one), the prompt is valid for OpenAI and Anthropic, and the
`recall` tool is bound whenever a placeholder in the prompt tells the model to call it. Retry and
fallback must not re-run the summarizer: the summarizer is called as often as without them.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import (
    AgentMiddleware,
    HumanInTheLoopMiddleware,
    LLMToolSelectorMiddleware,
    ModelCallLimitMiddleware,
    ModelFallbackMiddleware,
    ModelRequest,
    ModelRetryMiddleware,
    PIIMiddleware,
    TodoListMiddleware,
    ToolRetryMiddleware,
    dynamic_prompt,
)
from langchain.agents.structured_output import ToolStrategy
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore
from langgraph.types import Command
from pydantic import BaseModel
from typing_extensions import TypedDict

from langgraph_ctx import Compaction, ContextBudget, ContextMemory
from langgraph_ctx.messages import text_of
from langgraph_ctx.prompt.report import REPORT_KEY
from langgraph_ctx.tokens import get_counter
from tests.conftest import make_strategies
from tests.fakes import ScriptedChatModel
from tests.providers import provider_problems

PRIMARY_WINDOW = 6_000
FALLBACK_WINDOW = 4_000
TURNS = 5
SUMMARY = "<completed>read the files</completed><remaining>answer</remaining>"
FILE = " ".join(f"line{i} of the file, with some words to read" for i in range(110))


class Answer(BaseModel):
    """The final answer."""

    text: str


class Ctx(TypedDict):
    user: str


def agent_step(
    final: Callable[[], AIMessage], reads: int
) -> Callable[[list[BaseMessage]], AIMessage]:
    """Read a file `reads` times, answer, and again: the same replies whatever the prompt."""
    done = itertools.count()

    def step(prompt: list[BaseMessage]) -> AIMessage:
        if next(done) % (reads + 1) == reads:
            return final()
        call = {"name": "read_file", "args": {"path": "a.txt"}, "id": f"c-{uuid.uuid4().hex[:8]}"}
        return AIMessage("", tool_calls=[call])

    return step


def text_answer() -> AIMessage:
    return AIMessage("The file says hello.")


def structured_answer() -> AIMessage:
    call = {"name": "Answer", "args": {"text": "hello"}, "id": f"s-{uuid.uuid4().hex[:8]}"}
    return AIMessage("", tool_calls=[call])


COUNTER = get_counter("gpt-4o")


def model(
    window: int, final: Callable[[], AIMessage] = text_answer, reads: int = 1, **options: Any
) -> Any:
    """An agent model of this window; its replies report the prompt's tokens, tools included."""
    step = agent_step(final, reads)
    return ScriptedChatModel(
        messages=itertools.repeat(step),
        profile={"max_input_tokens": window},
        usage_counter=COUNTER,
        **options,
    )


flaky_calls = itertools.count()


@tool
def read_file(path: str) -> str:
    """Read a file."""
    return FILE


@tool
def flaky_read_file(path: str) -> str:
    """Read a file (fails every other call, as a flaky disk would)."""
    if next(flaky_calls) % 2 == 0:
        raise OSError("disk busy")
    return FILE


@tool
def search(query: str) -> str:
    """Search the web."""
    return "nothing"


IN_CALL = {"hint_threshold": 1.0}
"""No rebuild after a turn: the summarizer runs inside the model call, where a retry lands."""


@dataclass
class Case:
    """One composition: the other middleware and what the agent needs for it."""

    middleware: list[Any] = field(default_factory=list)
    models: list[ScriptedChatModel] = field(default_factory=list)
    """Every agent model that may be called (the first is the agent's)."""
    agent: dict[str, Any] = field(default_factory=dict)
    invoke: dict[str, Any] = field(default_factory=dict)
    tools: Sequence[Any] = (read_file, search)
    final: Callable[[], AIMessage] = text_answer
    resume: bool = False
    memory: dict[str, Any] = field(default_factory=dict)
    """Options of the `ContextMemory` over the defaults of the matrix."""


def case(name: str) -> Case:
    primary = model(PRIMARY_WINDOW)
    if name == "todo_list":
        return Case([TodoListMiddleware()], [primary])
    if name == "dynamic_prompt":

        @dynamic_prompt
        def prompt(request: ModelRequest[Any]) -> str:
            return "You are a careful assistant who reads files before answering. " * 5

        return Case([prompt], [primary])
    if name == "human_in_the_loop":
        return Case(
            [HumanInTheLoopMiddleware(interrupt_on={"read_file": True})], [primary], resume=True
        )
    if name == "model_retry":
        # Every call fails once, then succeeds: each build is retried, summarizing ones too.
        flaky = model(PRIMARY_WINDOW, failures={n: RuntimeError("503") for n in range(1, 99, 2)})
        retry = ModelRetryMiddleware(max_retries=2, initial_delay=0, jitter=False)
        return Case([retry], [flaky], memory=IN_CALL)
    if name == "model_fallback":
        failing = model(PRIMARY_WINDOW, failures={n: RuntimeError("503") for n in range(1, 99)})
        same = model(PRIMARY_WINDOW)
        return Case([ModelFallbackMiddleware(same)], [failing, same], memory=IN_CALL)
    if name == "model_fallback_smaller":
        failing = model(PRIMARY_WINDOW, failures={n: RuntimeError("503") for n in range(1, 99)})
        fallback = model(FALLBACK_WINDOW)
        return Case([ModelFallbackMiddleware(fallback)], [failing, fallback])
    if name == "tool_retry":
        retry = ToolRetryMiddleware(max_retries=2, initial_delay=0, jitter=False)
        return Case([retry], [model(PRIMARY_WINDOW)], tools=[flaky_read_file, search])
    if name == "pii":
        return Case([PIIMiddleware("email", strategy="redact")], [primary])
    if name == "tool_selector":
        selector = ScriptedChatModel(messages=itertools.repeat({"tools": ["read_file"]}))
        # Long turns, compaction and a shallow cut (as in the long-turn recall test): older
        # outputs stay in view as placeholders that tell the model to call recall.
        selecting = LLMToolSelectorMiddleware(model=selector, max_tools=1)
        budget = ContextBudget(context_window_tokens=PRIMARY_WINDOW, trigger=0.95, target=0.6)
        options = {
            "budget": budget,
            "strategies": make_strategies(compaction=Compaction(keep_last=1)),
        }
        return Case([selecting], [model(PRIMARY_WINDOW, reads=8)], memory=options)
    if name == "model_call_limit":
        return Case([ModelCallLimitMiddleware(run_limit=20)], [primary])
    if name == "response_format":
        structured = model(PRIMARY_WINDOW, final=structured_answer)
        return Case([], [structured], agent={"response_format": ToolStrategy(Answer)})
    if name == "context_and_store":
        return Case(
            [],
            [primary],
            agent={"context_schema": Ctx, "store": InMemoryStore()},
            invoke={"context": {"user": "ada"}},
        )
    raise AssertionError(name)


CASES = [
    "todo_list",
    "dynamic_prompt",
    "human_in_the_loop",
    "model_retry",
    "model_fallback",
    "model_fallback_smaller",
    "tool_retry",
    "pii",
    "tool_selector",
    "model_call_limit",
    "response_format",
    "context_and_store",
]


@dataclass
class Outcome:
    memory: ContextMemory
    models: list[ScriptedChatModel]
    summarizer: ScriptedChatModel
    state: dict[str, Any]
    history: list[BaseMessage]


def run_case(c: Case, order: str) -> Outcome:
    summarizer = ScriptedChatModel(fallback=SUMMARY)
    tools = list(c.tools)
    if c.tools and c.tools[0] is flaky_read_file:  # the script calls read_file
        tools = [flaky_read_file.model_copy(update={"name": "read_file"}), search]
    options: dict[str, Any] = {
        "model": c.models[0],
        # The fake models bill by gpt-4o's tokenizer (`usage_counter`): the memory counts as
        # the provider bills, so "received > counted" is a real escape, not estimate noise.
        "token_counter": COUNTER,
        "summarizer": summarizer,
        "strategies": make_strategies(summarize=True, compaction=Compaction(keep_last=1)),
        **c.memory,
    }
    memory = ContextMemory(**options)
    ours: AgentMiddleware[Any, Any] = memory.middleware()
    stack = [ours, *c.middleware] if order == "ours_first" else [*c.middleware, ours]
    agent = create_agent(
        c.models[0],
        tools,
        system_prompt="You read files for the user.",
        middleware=stack,
        checkpointer=InMemorySaver(),
        **c.agent,
    )
    config: Any = {
        "configurable": {"thread_id": f"t-{uuid.uuid4().hex[:8]}"},
        "recursion_limit": 60,
    }
    for turn in range(TURNS):
        text = f"Turn {turn}: what does a.txt say? Mail me at ada{turn}@example.com."
        result = agent.invoke({"messages": [HumanMessage(text)]}, config, **c.invoke)
        while c.resume and result.get("__interrupt__"):
            decisions = {"decisions": [{"type": "approve"}]}
            result = agent.invoke(Command(resume=decisions), config, **c.invoke)
    state = agent.get_state(config).values
    return Outcome(memory, c.models, summarizer, state, memory.get_full_history(agent, config))


def check_calls(outcome: Outcome) -> list[str]:
    """What went wrong in the calls the agent's models received (empty when all is well)."""
    counter = COUNTER
    problems: list[str] = []
    # What the model received (its reported usage) against what the build counted (the report).
    for reply in outcome.history:
        report = reply.response_metadata.get(REPORT_KEY) if isinstance(reply, AIMessage) else None
        if report and reply.usage_metadata:
            # With a middleware inside ours that changed the request, the report says what the
            # model received, counted at the call (`received_tokens`).
            counted = report.get("received_tokens") or report["tokens"]
            received = reply.usage_metadata["input_tokens"]
            if received > counted:
                problems.append(f"{reply.id}: received {received} > counted {counted}")
    calls = 0
    for m in outcome.models:
        window = m.profile["max_input_tokens"] if m.profile else 0
        for n, (prompt, tools) in enumerate(zip(m.prompts, m.prompt_tools, strict=True), 1):
            calls += 1
            tokens = counter(prompt) + counter.count_tools(tools)
            if tokens > window:
                problems.append(f"call {n}: {tokens} tokens > window {window}")
            problems += [f"call {n}: {p}" for p in provider_problems(prompt)]
            names = {t["function"]["name"] for t in tools}
            if any('recall(ref="' in text_of(x) for x in prompt) and "recall" not in names:
                problems.append(f"call {n}: a placeholder names recall, which is not bound")
    assert calls >= 2 * TURNS, "the agent ran"
    return problems


def references_recall(outcome: Outcome) -> bool:
    return any('recall(ref="' in text_of(x) for m in outcome.models for p in m.prompts for x in p)


@pytest.fixture(scope="module")
def baseline_summaries() -> int:
    """Summarizer calls of the same run with no other middleware."""
    outcome = run_case(Case([], [model(PRIMARY_WINDOW)], memory=IN_CALL), "ours_last")
    assert not check_calls(outcome)
    assert outcome.summarizer.prompts, "the run summarizes"
    return len(outcome.summarizer.prompts)


CHANGES_THE_REQUEST = {"todo_list", "dynamic_prompt", "model_fallback_smaller", "tool_selector"}
"""Middleware that changes the request (system prompt, tools, model) after the build when it is
placed inside ours. The build cannot count what it never sees; the call guard counts what the
model receives and the next builds leave room for it (`langgraph_ctx.graph.guard`)."""


def orders(name: str) -> list[Any]:
    return [pytest.param(name, "ours_first"), pytest.param(name, "ours_last")]


@pytest.mark.parametrize(("name", "order"), [p for name in CASES for p in orders(name)])
def test_composition(name: str, order: str, baseline_summaries: int) -> None:
    outcome = run_case(case(name), order)
    assert check_calls(outcome) == []
    if name in ("model_retry", "model_fallback"):  # the retried build is not made again
        assert len(outcome.summarizer.prompts) <= baseline_summaries
    if name == "tool_selector" and order == "ours_last":
        # The selector keeps read_file only; ours, outside it, binds recall again.
        assert references_recall(outcome)
    if name == "tool_selector" and order == "ours_first":
        # Ours cannot bind what a middleware inside drops: the placeholders name the archive
        # without telling the model to call recall (`check_calls` checks no prompt does).
        assert not references_recall(outcome)
        assert any(
            "[compacted tool output" in text_of(x)
            for m in outcome.models
            for p in m.prompts
            for x in p
        )
    if name in CHANGES_THE_REQUEST and order == "ours_first":
        called = outcome.state["context_ledger"].get("called")
        assert called, "the guard learned what the model receives"
    if name == "response_format":
        assert outcome.state["structured_response"] == Answer(text="hello")
