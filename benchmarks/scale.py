"""Scale (issue 16) and checkpoint size (issue 14 item 6).

* Per-call build time at 100, 1,000, 5,000 and 20,000 messages of one thread, summaries on
  (`ContextManager` with `default_strategies()`, an archive and the deterministic summary),
  with the ledger carried from call to call as a graph would; and the ledger's size in bytes
  (what every checkpoint holds besides the messages).
* Checkpoint bytes after N turns of a `create_agent` graph with the package's middleware
  against the same graph without it (same scripted model, same tool outputs), under an
  `InMemorySaver`: the serialized size of the newest checkpoint, with the defaults (summarized
  messages leave the state) and with `remove_summarized=False` (only the brief reports and the
  ledger differ).

The conversation is synthetic and seeded: each turn is a request, one tool call, its output
(200 to 6,000 characters) and an answer.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.store.memory import InMemoryStore

from benchmarks._table import fmt_int, print_table
from langgraph_ctx.archive import Archive
from langgraph_ctx.pipeline import ContextManager
from langgraph_ctx.strategies import default_strategies

WINDOW = 32_000
SIZES = (100, 1_000, 5_000, 20_000)
QUICK_SIZES = (100, 1_000, 5_000)
CHECKPOINT_WINDOW = 8_000
"""The window of the checkpoint-size runs: small enough that summaries happen within N turns."""
TIMED_CALLS = 30
"""Calls timed at each size (the median is printed)."""


def _turn(rng: random.Random, n: int) -> list[BaseMessage]:
    call = {"name": "read", "args": {"path": f"src/f{n}.py"}, "id": f"c{n}", "type": "tool_call"}
    lines = rng.randint(4, 100)
    output = "\n".join(f"{n}:{i}: value = compute({i}, {rng.random():.6f})" for i in range(lines))
    return [
        HumanMessage(f"step {n}: read src/f{n}.py and report", id=f"h{n}"),
        AIMessage("", tool_calls=[call], id=f"a{n}"),
        ToolMessage(output, tool_call_id=f"c{n}", name="read", id=f"t{n}"),
        AIMessage(f"src/f{n}.py has {lines} lines", id=f"r{n}"),
    ]


def build_times(sizes: tuple[int, ...]) -> list[tuple[int, float, int, int]]:
    """`(messages, median ms per build, ledger bytes, summaries so far)` at each size."""
    rng = random.Random(16)
    manager = ContextManager(
        context_window_tokens=WINDOW,
        strategies=default_strategies(),
        archive=Archive(InMemoryStore(), thread_id="scale"),
    )
    history: list[BaseMessage] = []
    ledger: dict[str, Any] | None = None
    rows: list[tuple[int, float, int, int]] = []
    n = 0
    for size in sizes:
        while len(history) < size:  # grow with one build per turn, carrying the ledger
            history.extend(_turn(rng, n))
            n += 1
            ledger = manager.build(history, state=ledger).state
        times = []
        for _ in range(TIMED_CALLS):
            history.extend(_turn(rng, n))
            n += 1
            started = time.perf_counter()
            ledger = manager.build(history, state=ledger).state
            times.append((time.perf_counter() - started) * 1000)
        updates = int(((ledger or {}).get("summary") or {}).get("updates", 0))
        rows.append((size, statistics.median(times), _ledger_bytes(ledger), updates))
    return rows


def _ledger_bytes(ledger: Any) -> int:
    return len(json.dumps(ledger, sort_keys=True, default=str).encode())


def checkpoint_bytes(turns: int, **options: Any) -> int:
    """Bytes of the newest checkpoint after `turns` turns (no package when `options` is None)."""
    from langchain.agents import create_agent
    from langchain_core.tools import tool
    from langgraph.checkpoint.memory import InMemorySaver

    from langgraph_ctx import ContextMemory
    from langgraph_ctx.scripted import ScriptedChatModel

    rng = random.Random(14)
    outputs = {
        n: "\n".join(f"{n}:{i}: {rng.random():.12f}" for i in range(rng.randint(10, 300)))
        for n in range(turns)
    }

    @tool
    def read(path: str) -> str:
        """Read a file."""
        return outputs[int(path.removeprefix("f"))]

    replies: list[AIMessage] = []
    for n in range(turns):
        call = {"name": "read", "args": {"path": f"f{n}"}, "id": f"c{n}", "type": "tool_call"}
        replies += [AIMessage("", tool_calls=[call]), AIMessage(f"f{n} read")]
    model = ScriptedChatModel(messages=replies)
    middleware = []
    if options.get("package", True):
        options.pop("package", None)
        memory = ContextMemory(context_window_tokens=CHECKPOINT_WINDOW, **options)
        middleware = [memory.middleware()]
    checkpointer = InMemorySaver()
    agent = create_agent(model, tools=[read], middleware=middleware, checkpointer=checkpointer)
    config = {"configurable": {"thread_id": "size"}}
    for n in range(turns):
        agent.invoke({"messages": [HumanMessage(f"read f{n}")]}, config)
    saved = checkpointer.get_tuple(config)
    assert saved is not None
    return len(checkpointer.serde.dumps_typed(saved.checkpoint)[1])


def run(args: argparse.Namespace) -> None:
    """Print build time and ledger size by history length, then checkpoint sizes."""
    sizes = QUICK_SIZES if args.quick else SIZES
    rows = build_times(sizes)
    base = rows[0][1]
    print_table(
        f"Per-call build time with summaries on (window {WINDOW:,}, median of {TIMED_CALLS})",
        ["messages", "ms per build", "x the time at 100", "ledger bytes", "summaries"],
        [
            [fmt_int(size), f"{ms:.2f}", f"{ms / base:.2f}", fmt_int(size_b), fmt_int(updates)]
            for size, ms, size_b, updates in rows
        ],
        notes=["goal: at 20,000 messages at most 2x the time at 100; ledger bytes flat"],
    )
    turns = 15 if args.quick else 40
    without = checkpoint_bytes(turns, package=False)
    cases = [("defaults", {}), ("remove_summarized=False", {"remove_summarized": False})]
    table = [["without the package", fmt_int(without), "1.00"]]
    for label, options in cases:
        size = checkpoint_bytes(turns, **options)
        table.append([f"with the package, {label}", fmt_int(size), f"{size / without:.2f}"])
    print_table(
        f"Checkpoint bytes after {turns} turns (create_agent, InMemorySaver, newest checkpoint)",
        ["graph", "bytes", "x without"],
        table,
        notes=["goal: smaller than without the package, with the defaults"],
    )
