"""Long threads: a 100,000-message thread keeps working with the defaults, and every message a
summary replaced is recallable by the agent through a reference its prompt shows."""

from __future__ import annotations

import itertools
import re
import time
import uuid
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from langgraph_ctx import ContextMemory
from langgraph_ctx.archive.dumps import all_dump_refs
from langgraph_ctx.ledger.summary import parse_dump_index
from langgraph_ctx.messages import text_of, validate_messages
from langgraph_ctx.prompt.report import REPORT_KEY
from tests.conftest import summary_first_strategies
from tests.fakes import ScriptedChatModel

REF_RE = re.compile(r'recall\(ref="(lgctx:[^"]+)"\)')


def _config() -> Any:
    return {"configurable": {"thread_id": uuid.uuid4().hex}}


@pytest.mark.slow
def test_a_thread_of_100000_messages_keeps_working_with_the_defaults() -> None:
    memory = ContextMemory(context_window_tokens=32_000)
    model = ScriptedChatModel(messages=["first answer", "second answer"])
    agent = create_agent(model, middleware=[memory.middleware()], checkpointer=InMemorySaver())
    config = _config()
    history: list[BaseMessage] = []
    for n in range(25_000):
        history += [
            HumanMessage(f"question {n}", id=f"h{n}"),
            AIMessage(f"answer {n}", id=f"a{n}"),
            HumanMessage(f"more {n}", id=f"m{n}"),
            AIMessage(f"done {n}", id=f"d{n}"),
        ]
    agent.update_state(config, {"messages": history})
    for turn in ("go on", "and again"):
        started = time.perf_counter()
        result = agent.invoke({"messages": [HumanMessage(turn)]}, config)
        took = time.perf_counter() - started
        answer = result["messages"][-1]
        assert isinstance(answer, AIMessage) and answer.response_metadata[REPORT_KEY]["ok"]
        assert took < 120, took
    for prompt in model.prompts:
        assert validate_messages(prompt) == []
        assert memory.manager.token_counter(prompt) <= memory.manager.budget.limit
    # What the first call summarized left the state (the archive outlives it: same process).
    state = agent.get_state(config).values
    assert len(state["messages"]) < len(history)
    ledger = state["context_ledger"]
    assert len(str(ledger)) < 20_000, len(str(ledger))


READS = 18
"""Reads of about 300 tokens in a 3,000-token window: several summaries."""


def test_the_agent_recalls_summarized_messages_through_the_references_it_sees() -> None:
    """A real agent: after summaries removed the early turns, the model calls `recall` with a
    reference named in its prompt's summary message, and reads back an early tool output.

    Prune, compact, then summarize (the list before excerpts and shortened turns): the run
    reaches several summaries (with the defaults' excerpts, eighteen reads reach one)."""
    memory = ContextMemory(context_window_tokens=3_000, strategies=summary_first_strategies())
    outputs = {n: f"secret-{n}: " + "data " * 300 for n in range(READS)}

    @tool
    def read(n: int) -> str:
        """Read part n."""
        return outputs[n]

    seen_refs: list[str] = []

    def recall_from_summary(prompt: list[BaseMessage]) -> AIMessage:
        refs = [ref for m in prompt for ref in REF_RE.findall(text_of(m))]
        assert refs, "no recall reference in the prompt"
        seen_refs.extend(refs)
        call = {"name": "recall", "args": {"ref": refs[0]}, "id": "r1", "type": "tool_call"}
        return AIMessage("", tool_calls=[call])

    script: list[Any] = []
    for n in range(READS):
        call = {"name": "read", "args": {"n": n}, "id": f"c{n}", "type": "tool_call"}
        script += [AIMessage("", tool_calls=[call]), f"read part {n}"]
    script += [recall_from_summary, "recalled"]
    model = ScriptedChatModel(messages=script)
    agent = create_agent(
        model, tools=[read], middleware=[memory.middleware()], checkpointer=InMemorySaver()
    )
    config = _config()
    for n in range(READS):
        agent.invoke({"messages": [HumanMessage(f"read part {n}")]}, config)
    result = agent.invoke({"messages": [HumanMessage("what did part 0 say?")]}, config)
    state = result["messages"]
    live = {m.id for m in state}
    full = memory.get_full_history(agent, config)
    removed = [m for m in full if m.id not in live]
    assert removed, "nothing left the state: the test proves nothing"
    recalled = next(m for m in reversed(state) if isinstance(m, ToolMessage) and m.name == "recall")
    assert recalled.status != "error" and "secret-" in text_of(recalled)  # an early output
    # Every removed message is in a dump the prompt names, directly or through the dump index.
    archive = memory.archive_for(config)
    reachable: set[str] = set()
    last_prompt = model.prompts[-1]  # after the final removal, what the agent sees next
    pending = list(dict.fromkeys(r for m in last_prompt for r in REF_RE.findall(text_of(m))))
    while pending:
        entry = archive.read(pending.pop())
        if isinstance(entry, str):  # a dump index: older dumps, and the index before it
            older, previous = parse_dump_index(entry)
            pending += [*older, *([previous] if previous else [])]
        elif isinstance(entry, list):
            reachable |= {m.id or "" for m in entry}
    missing = [(m.type, text_of(m)[:40]) for m in removed if m.id not in reachable]
    assert not missing, missing
    # Between summaries the summary message stays the same bytes (removal dumps are not
    # listed, older refs move to the index only when a summary lands): the prefix caches. The
    # one other change is the call that first binds search_history (its tools change too, so
    # nothing is cached across it), from which the note names the tool.
    notes = [
        (text_of(m), tuple(t["function"]["name"] for t in tools))
        for prompt, tools in zip(model.prompts, model.prompt_tools, strict=True)
        for m in prompt
        if text_of(m).startswith("<summary>")
    ]
    for (before, tools_before), (after, tools_after) in itertools.pairwise(notes):
        same_body = before.partition("</summary>")[0] == after.partition("</summary>")[0]
        if same_body and tools_before == tools_after:
            assert before == after
    assert len({note for note, _ in notes}) > 1, "one summary only: the test proves little"
    assert any("search_history finds any line of them" in note for note, _ in notes)
    ledger = agent.get_state(config).values["context_ledger"]
    dumps_seen = {r for r in seen_refs if not isinstance(archive.read(r), str)}  # not indexes
    assert set(all_dump_refs(ledger, archive)) >= dumps_seen
