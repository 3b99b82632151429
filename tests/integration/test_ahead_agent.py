"""A real `create_agent` graph with a slow summarizer: prepared ahead, the model never waits."""

from __future__ import annotations

import time
import uuid
from dataclasses import asdict
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from langgraph_ctx import ContextMemory
from langgraph_ctx.summaries.summarizer import Summarizer
from tests.conftest import run
from tests.fakes import scripted
from tests.unit.test_ahead import SlowSummarizer

DELAY = 0.6
"""Seconds each summarizer call takes."""
PACE = 0.3
"""Seconds each tool call takes (the agent's own work between two model calls)."""
STEPS = 36


def _agent(prepare: bool) -> tuple[Any, list[float], list[float], SlowSummarizer]:
    called: list[float] = []
    finished: list[float] = []

    @tool
    def work(k: int) -> str:
        """Do step k of the task."""
        time.sleep(PACE)
        finished.append(time.perf_counter())
        return "\n".join(f"step {k} line {n}: value {k * 100 + n} checked" for n in range(40))

    def step(k: int) -> Any:
        def reply(prompt: list[BaseMessage]) -> AIMessage:
            called.append(time.perf_counter())
            if k == STEPS:
                return AIMessage("Done.")
            return AIMessage("", tool_calls=[{"name": "work", "args": {"k": k}, "id": f"c{k}"}])

        return reply

    summarizer = SlowSummarizer(delay=DELAY)
    memory = ContextMemory(
        context_window_tokens=6_000,
        summarizer=Summarizer(model=summarizer),
        prepare_summaries=prepare,
        expose_recall=False,
    )
    model = scripted(*(step(k) for k in range(STEPS + 1)))
    agent = create_agent(
        model, [work], middleware=[memory.middleware()], checkpointer=InMemorySaver()
    )
    return agent, called, finished, summarizer, memory


async def _run(prepare: bool, mode: str) -> tuple[list[float], list[dict[str, Any]]]:
    agent, called, finished, _, memory = _agent(prepare)
    config = {"configurable": {"thread_id": uuid.uuid4().hex}}
    task = {"messages": [HumanMessage("Work through the steps.")]}
    await run(mode, agent.invoke, agent.ainvoke, task, config)
    # The time from a tool's end to the next model call: what the build added.
    waits = [c - f for c, f in zip(called[1:], finished, strict=False)]
    # Each AI message carries a brief report; the full ones (with each decision's detail)
    # are in the ledger of the thread's checkpoints.
    reports = await memory.aget_reports(agent, config)
    summaries = [asdict(d) for r in reports for d in r.decisions if d.kind == "auto_compact"]
    return waits, summaries


async def test_the_model_call_no_longer_waits_for_the_summarizer(mode: str) -> None:
    waits, summaries = await _run(True, mode)
    assert summaries and all(d["detail"].get("ahead") == "prepared" for d in summaries)
    # Never a whole summarizer call (a loaded machine adds build time, not a summary's).
    assert max(waits) < DELAY, max(waits)
    # Without preparing, the call that reaches the trigger waits for the summarizer.
    waits_off, summaries_off = await _run(False, mode)
    assert summaries_off and max(waits_off) >= DELAY
