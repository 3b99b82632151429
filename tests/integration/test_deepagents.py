"""`memory.middleware()` inside deepagents: the main agent and a subagent, each with a memory.

`create_deep_agent(model, tools, middleware=[memory.middleware()], subagents=[{...,
"middleware": [sub_memory.middleware()]}])` in an 8,000-token window: the main agent reads 42
documents of about 700 tokens each, delegates to the subagent with deepagents' `task` tool a
job of 42 more reads, and both search what left their prompts. Only the chat models are
scripted; the deepagents graph, its middleware, the checkpointer, the store, the archive and
the tools are the real ones.

What deepagents does around ours (deepagents 0.7):

- Its own `SummarizationMiddleware` sits outside ours (user middleware goes after its base
  stack). It counts the raw history and, past 85% of the model profile's `max_input_tokens`,
  asks the agent's own model for a summary and hands ours only that summary and a short tail.
  Ours excerpts every output as it arrives, so the lines of the outputs deepagents summarized
  are still in our archive and `search_history` finds them.
- The `task` tool runs the subagent as a subgraph inside the tool call, with the parent's
  config: the subagent's thread is the parent's `thread_id`. Our archive is keyed by thread, so
  where both memories reach the same persistence (a store, a durable checkpointer such as
  `SqliteSaver`) the two agents share one archive, and the main agent's search finds the
  subagent's lines. Under in-memory checkpoints with no store each `ContextMemory` keeps its own
  in-process archive, and the main agent's search does not.
- deepagents passes every state key not marked private into the subagent and merges the
  subagent's back; `context_ledger` is private (`PrivateStateAttr`, as LangChain's middleware
  keep their bookkeeping), so each agent keeps its own (the last test).
"""

from __future__ import annotations

import collections
import itertools
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("deepagents")
from deepagents import create_deep_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver

from langgraph_ctx import ContextMemory
from langgraph_ctx.messages import text_of
from langgraph_ctx.messages.validation import validate_messages
from langgraph_ctx.tokens.counter import count_tool_tokens
from tests.fakes import ScriptedChatModel
from tests.test_readme import section

WINDOW = 8_000
READS = 42
MAIN_LINE = "The release train leaves every Thursday from platform nine."
SUB_LINE = "The backup bucket for region ember is cold-store-ember-42."
SUB_QUERY = "backup bucket ember"
SUMMARY_PROMPT = "Context Extraction Assistant"  # deepagents' summarization prompt
RECALL_RE = re.compile(r'recall\(ref="([^"]+)", start_line=(\d+), end_line=(\d+)\)')


def doc_text(name: str) -> str:
    """40 lines of measurements (about 700 tokens); `main-5` and `sub-7` hold a planted line."""
    n = int(name.rsplit("-", 1)[1])
    lines = [
        f"{name} line {i:02}: value {i * n % 97} measured at station {n}-{i} with drift {i % 7}"
        for i in range(40)
    ]
    lines[20] = {"main-5": MAIN_LINE, "sub-7": SUB_LINE}.get(name, lines[20])
    return "\n".join(lines)


@tool
def read_doc(name: str) -> str:
    """Read one measurement document by name."""
    return doc_text(name)


def call(name: str, args: dict[str, Any], call_id: str) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": call_id}])


def reads(prefix: str) -> list[AIMessage]:
    return [call("read_doc", {"name": f"{prefix}-{n}"}, f"{prefix}-r{n}") for n in range(READS)]


def last_tool_text(prompt: list[BaseMessage]) -> str:
    return text_of(next(m for m in reversed(prompt) if isinstance(m, ToolMessage)))


def shows(prompt: list[BaseMessage], line: str) -> bool:
    return any(line in text_of(m) for m in prompt)


class Script:
    """A fake model's steps in order; deepagents' summary requests are answered on the side.

    deepagents' summarization calls the agent's own model with one human message; those calls
    get a short summary and do not consume a step, so the script holds whatever deepagents
    decides to summarize.
    """

    def __init__(self, label: str, steps: list[Any]) -> None:
        self.label, self.steps, self.summaries = label, collections.deque(steps), 0
        self.model = ScriptedChatModel(
            messages=itertools.repeat(self.step), profile={"max_input_tokens": WINDOW}
        )

    def step(self, prompt: list[BaseMessage]) -> AIMessage:
        if len(prompt) == 1 and SUMMARY_PROMPT in text_of(prompt[0]):
            self.summaries += 1
            return AIMessage(f"{self.label} read documents; summary {self.summaries}.")
        step = self.steps.popleft() if self.steps else AIMessage("Done.")
        return step(prompt) if callable(step) else step  # type: ignore[no-any-return]


def search_recall_answer(found: dict[str, Any], who: str, line: str) -> list[Any]:
    """Search for the words of `line` once it left the prompt, recall the hit, answer with it."""

    def search(prompt: list[BaseMessage]) -> AIMessage:
        found[f"{who}_hidden"] = not shows(prompt, line)
        return call("search_history", {"query": SUB_QUERY}, f"{who}-s")

    def recall(prompt: list[BaseMessage]) -> AIMessage:
        found[f"{who}_search"] = answer = last_tool_text(prompt)
        hit = RECALL_RE.search(answer)
        if hit is None:  # nothing found: answer so
            return AIMessage(f"{who}: nothing matched.")
        ref, first, last = hit.groups()
        found[f"{who}_ref"] = ref
        args = {"ref": ref, "start_line": int(first), "end_line": int(last)}
        return call("recall", args, f"{who}-r")

    def answer(prompt: list[BaseMessage]) -> AIMessage:
        found[f"{who}_recall"] = recalled = last_tool_text(prompt)
        got = next((ln for ln in recalled.splitlines() if line in ln), "nothing")
        return AIMessage(f"{who} found: {got.strip()}")

    return [search, recall, answer]


def build(
    found: dict[str, Any], checkpointer: Any, store: Any = None
) -> tuple[Any, Script, Script, ContextMemory, ContextMemory]:
    """The deep agent: main reads, delegates, searches for the subagent's line; sub likewise."""
    sub = Script("sub", [*reads("sub"), *search_recall_answer(found, "sub", SUB_LINE)])
    delegate = call(
        "task", {"description": "Audit the sub documents.", "subagent_type": "auditor"}, "t1"
    )
    main = Script(
        "main", [*reads("main"), delegate, *search_recall_answer(found, "main", SUB_LINE)]
    )
    memory, sub_memory = ContextMemory(model=main.model), ContextMemory(model=sub.model)
    auditor = {
        "name": "auditor",
        "description": "Reads and audits measurement documents.",
        "system_prompt": "You audit measurement documents.",
        "tools": [read_doc],
        "model": sub.model,
        "middleware": [sub_memory.middleware()],
    }
    agent = create_deep_agent(
        main.model,
        [read_doc],
        middleware=[memory.middleware()],
        subagents=[auditor],  # type: ignore[list-item]
        checkpointer=checkpointer,
        store=store,
    )
    return agent, main, sub, memory, sub_memory


def run(agent: Any, thread_id: str) -> RunnableConfig:
    config: RunnableConfig = {"configurable": {"thread_id": thread_id}, "recursion_limit": 1_000}
    agent.invoke({"messages": [HumanMessage("Audit every document.")]}, config)
    return config


def check_prompts(script: Script, memory: ContextMemory) -> None:
    """(a) Every prompt the model got, summary requests included, fits the window by the
    memory's own counter (tool schemas included), and pairs its tool calls and results."""
    counter = memory.counter_for(script.model)
    assert len(script.model.prompts) > READS
    for prompt, tools in zip(script.model.prompts, script.model.prompt_tools, strict=True):
        tokens = counter(prompt) + count_tool_tokens(counter, tools)
        assert tokens <= memory.manager.budget.limit == WINDOW, (script.label, tokens)
        assert not validate_messages(prompt), (script.label, validate_messages(prompt))


@pytest.fixture
def sqlite_saver(tmp_path: Path) -> Iterator[SqliteSaver]:
    with SqliteSaver.from_conn_string(str(tmp_path / "deep.sqlite")) as saver:
        yield saver


def test_main_and_subagent_stay_in_the_window_and_search_their_thread(
    sqlite_saver: SqliteSaver,
) -> None:
    found: dict[str, Any] = {}
    agent, main, sub, memory, sub_memory = build(found, sqlite_saver)
    config = run(agent, "deep")
    counter = memory.counter_for(main.model)
    outputs = [
        counter([ToolMessage(doc_text(f"main-{n}"), tool_call_id="x")]) for n in range(READS)
    ]
    assert min(outputs) > 500 and sum(outputs) > 2 * WINDOW  # much had to leave the prompt
    check_prompts(main, memory)
    check_prompts(sub, sub_memory)
    # deepagents' own summarization ran outside ours in both agents, with their own models.
    assert main.summaries > 0 and sub.summaries > 0

    # (b) The subagent searched once its line had left its prompt, got the line with the
    # recall call that reads around it, recalled it and answered with it.
    assert found["sub_hidden"], "the planted line was still in the prompt: the test proves nothing"
    assert SUB_LINE in found["sub_search"] and "call sub-r7" in found["sub_search"]
    assert SUB_LINE in found["sub_recall"]
    bound = {t["function"]["name"] for t in sub.model.prompt_tools[-1]}
    assert {"recall", "search_history"} <= bound
    # The subagent's answer is the `task` result the main agent got.
    [task] = [m for m in agent.get_state(config).values["messages"] if m.name == "task"]
    assert text_of(task) == f"sub found: {SUB_LINE}"

    # (c) The subagent ran on the parent's thread: its references name that thread, and its
    # archive is that thread's archive in the SQLite file both memories share. So the main
    # agent's search finds the subagent's read itself (by its tool call), not only the line
    # the `task` result quotes, and recalls it.
    assert found["sub_ref"].startswith("lgctx:deep:")
    assert "call sub-r7" in found["main_search"] and SUB_LINE in found["main_recall"]
    assert found["main_ref"].startswith("lgctx:deep:")
    assert text_of(agent.get_state(config).values["messages"][-1]) == f"main found: {SUB_LINE}"


def test_in_memory_checkpoints_give_each_memory_its_own_archive() -> None:
    """No store and an `InMemorySaver`: each `ContextMemory` archives in its own process store,
    so the main agent's search misses the subagent's read: nothing matches (the line is only in
    the `task` result the main agent got back, still in its prompt, never archived)."""
    found: dict[str, Any] = {}
    agent, main, sub, memory, sub_memory = build(found, InMemorySaver())
    run(agent, "deep-memory")
    check_prompts(main, memory)
    check_prompts(sub, sub_memory)
    assert found["sub_hidden"] and "call sub-r7" in found["sub_search"]
    assert found["main_search"].startswith(f"search_history: no line matches {SUB_QUERY!r}")


def test_the_docs_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/integration.md "Inside deepagents", as written (fenced `py`: deepagents is in the
    bench extra, not the test one, so the page's block runner skips it and this test runs it)."""
    page, text = section("Inside deepagents")
    [code] = re.findall(r"```py\n(.*?)```", text, flags=re.S)
    namespace: dict[str, Any] = {}
    exec(compile(code, str(page), "exec"), namespace)
    assert capsys.readouterr().out == "The auditor read doc-1.\n"
    agent, config = namespace["agent"], namespace["config"]
    messages = agent.get_state(config).values["messages"]
    [task] = [m for m in messages if isinstance(m, ToolMessage) and m.name == "task"]
    assert text_of(task) == "Read."
    # Both agents were bound `recall` by their own memory's middleware.
    for model in (namespace["model"], namespace["sub_model"]):
        assert all("recall" in {t["function"]["name"] for t in ts} for ts in model.prompt_tools)
    reports = namespace["memory"].get_reports(agent, config)
    assert reports and all(r.ok and r.limit == 128_000 for r in reports)


def test_a_subagent_starts_without_the_main_agents_summary() -> None:
    """The main agent's memory summarizes its reads (its window is 8,000 tokens, the model
    profile's 128,000, so deepagents' summarization stays out), then delegates. The ledger is
    private state (`PrivateStateAttr`), so deepagents neither passes the parent's ledger into
    the subagent (whose first prompt would show the parent's summary) nor merges the
    subagent's back (the parent would hold the subagent's placeholders and summary)."""
    main = ScriptedChatModel(
        messages=iter(
            [
                *(call("read_doc", {"name": f"main-{n}"}, f"m{n}") for n in range(20)),
                call("task", {"description": "Audit sub-1.", "subagent_type": "auditor"}, "t1"),
                "Audited.",
            ]
        )
    )
    sub = ScriptedChatModel(messages=iter([call("read_doc", {"name": "sub-1"}, "s1"), "Done."]))
    memory = ContextMemory(model=main, context_window_tokens=WINDOW)
    sub_memory = ContextMemory(model=sub, context_window_tokens=WINDOW)
    auditor = {
        "name": "auditor",
        "description": "Audits.",
        "system_prompt": "You audit.",
        "tools": [read_doc],
        "model": sub,
        "middleware": [sub_memory.middleware()],
    }
    agent = create_deep_agent(
        main,
        [read_doc],
        middleware=[memory.middleware()],
        subagents=[auditor],  # type: ignore[list-item]
        checkpointer=InMemorySaver(),
    )
    config = run(agent, "leak")
    ledger = agent.get_state(config).values["context_ledger"]
    assert ledger["summary"], "no summary: no test"
    first = [text_of(m) for m in sub.prompts[0]]
    assert first == ["You audit.", "Audit sub-1."], first
    # Nothing of the subagent's run is in the parent's ledger: its ids are the parent's.
    parent_ids = {m.id for m in agent.get_state(config).values["messages"]}
    assert set(ledger["compacted"]) | set(ledger["pruned"]) <= parent_ids
