"""The defaults in a window of a few thousand tokens: summaries still land, excerpts stay small.

An excerpt made as an output arrives also shows the lines with names no earlier message showed
(`Compaction(arrival_news=True)`), never past the size at which outputs are excerpted on arrival;
a summary whose quoted lines leave it no room lands with fewer of them, down to none, rather
than not at all. Both matter only where the window is small: a real agent, 18 file reads, a
1,500-token window.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from langgraph_ctx import ContextMemory
from langgraph_ctx.scripted import ScriptedChatModel

READS = 18
WINDOW = 1_500
RESERVED = 300


@tool
def read_file(path: str) -> str:
    """Read a file."""
    n = int(path.removeprefix("src/mod_").removesuffix(".py"))
    return "\n".join(
        f"def handler_{n}_{i}(request): return dispatch_table_{n}[{i}]" for i in range(60)
    )


def run(tmp_path: Path, window: int = WINDOW) -> tuple[list[Any], dict[str, Any], int]:
    script: list[Any] = []
    for n in range(READS):
        call = {"name": "read_file", "args": {"path": f"src/mod_{n}.py"}, "id": f"c{n}"}
        said = f"handler_{n - 1}_3 calls dispatch_table_{n - 1}" if n else ""
        script.append(AIMessage(said, tool_calls=[call], id=f"a{n}"))
    script.append(AIMessage(f"Done: handler_{READS - 1}_7 is the culprit.", id="done"))
    model = ScriptedChatModel(messages=iter(script), profile={"max_input_tokens": window})
    memory = ContextMemory(model=model, reserved_output_tokens=RESERVED, archive=tmp_path / "a")
    saver = InMemorySaver()
    agent = create_agent(model, [read_file], middleware=[memory.middleware()], checkpointer=saver)
    config: Any = {"configurable": {"thread_id": "small"}}
    agent.invoke({"messages": [HumanMessage("Find the broken handler.", id="task")]}, config)
    ledgers = [s.values.get("context_ledger") or {} for s in agent.get_state_history(config)]
    reports = [ledger.get("last_report") for ledger in ledgers]
    live = agent.get_state(config).values
    return [r for r in reports if r], live, len(model.prompts)


def test_summaries_land_in_a_small_window_with_fewer_quotes(tmp_path: Path) -> None:
    reports, live, calls = run(tmp_path)
    assert calls == READS + 1
    summaries = [
        d
        for r in reports
        for d in r["decisions"]
        if d["kind"] == "auto_compact" and d["message_ids"]
    ]
    assert summaries, "no summary landed: the window only shrank"
    assert any("quotes_cut_to" in d["detail"] for d in summaries), (
        "no quote was cut: proves nothing"
    )
    assert live["context_ledger"]["summary"]["text"]
    # What a summary covers left the live state (it is in the archive).
    assert len(live["messages"]) < 2 * READS + 2


def middle_chars(live: dict[str, Any]) -> list[int]:
    """Characters of each excerpt's lines other than its first and last two."""
    lines = read_file.invoke({"path": "src/mod_1.py"}).splitlines()  # every output's shape
    return [
        sum(len(lines[k]) for k in entry["lines"] if 2 <= k < len(lines) - 2)
        for entry in live["context_ledger"]["compacted"].values()
    ]


def test_an_arrival_excerpt_stays_under_the_arrival_bound(tmp_path: Path) -> None:
    _, small, _ = run(tmp_path / "small")
    _, large, _ = run(tmp_path / "large", window=8_000)
    # 0.1 of the 1,200-token limit, at this text's 3.5-4 characters per token: under 500.
    assert small["context_ledger"]["compacted"] and max(middle_chars(small)) <= 500
    # In a window where the bound is far away, the room (800 characters) fills.
    assert max(middle_chars(large)) > 500
