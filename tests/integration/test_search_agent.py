"""The agent finds what left its prompt in one search (issue 40, item 5).

A `create_agent` run reads 45 files of about 60 lines each in an 8,000-token window: outputs
become excerpts as they arrive, old turns are shortened and folded into summaries. One file
holds a planted line in its middle. Once no prompt shows that line any more, the agent calls
`search_history` with words from it, gets the line with the `recall` call that reads around it,
recalls that range and answers. The same after a restart on the SQLite file (a new memory, a new
checkpointer and store on the same file), and a second thread on the same memory never sees the
first thread's line. Only the chat model is scripted; the graph, the checkpointer, the store,
the archive and both tools are the real ones.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.store.memory import InMemoryStore

from langgraph_ctx import ContextMemory
from langgraph_ctx.messages import text_of
from tests.fakes import ScriptedChatModel

WINDOW = 8_000
FILES = 45
PLANTED_FILE = 5
PLANTED = "Deploy keys rotate every Tuesday at 04:00 UTC through the vault-rotate job."
RECALL_RE = re.compile(r'recall\(ref="([^"]+)", start_line=(\d+), end_line=(\d+)\)')


def file_text(n: int) -> str:
    """About 60 lines of plain configuration notes; file `PLANTED_FILE` holds the planted line."""
    lines = [f"# notes for service {n:02}"]
    for i in range(1, 60):
        lines.append(f"setting_{n:02}_{i:02} = {i * 7 % 13} (tuned in review {n}.{i})")
    if n == PLANTED_FILE:
        lines[30] = PLANTED
    return "\n".join(lines)


@tool
def read_file(path: str) -> str:
    """Read one of the service notes files."""
    return file_text(int(path.removeprefix("notes/f").removesuffix(".txt")))


def read(n: int) -> AIMessage:
    call = {"name": "read_file", "args": {"path": f"notes/f{n:02}.txt"}, "id": f"read-{n}"}
    return AIMessage("", tool_calls=[call])


def shows_planted(prompt: list[BaseMessage]) -> bool:
    return any(PLANTED in text_of(m) for m in prompt)


def search_then_recall(found: dict[str, Any]) -> list[Any]:
    """The steps after the reads: search, recall the hit's range, answer with the line."""

    def search(prompt: list[BaseMessage]) -> AIMessage:
        found["hidden"] = not shows_planted(prompt)
        call = {"name": "search_history", "args": {"query": "deploy keys rotate"}, "id": "s1"}
        return AIMessage("", tool_calls=[call])

    def recall(prompt: list[BaseMessage]) -> AIMessage:
        answer = next(m for m in reversed(prompt) if isinstance(m, ToolMessage))
        found["search"] = text_of(answer)
        ref, first, last = RECALL_RE.search(found["search"]).groups()  # type: ignore[union-attr]
        args = {"ref": ref, "start_line": int(first), "end_line": int(last)}
        return AIMessage("", tool_calls=[{"name": "recall", "args": args, "id": "r1"}])

    def answer(prompt: list[BaseMessage]) -> AIMessage:
        recalled = next(m for m in reversed(prompt) if isinstance(m, ToolMessage))
        found["recall"] = text_of(recalled)
        line = next(ln for ln in found["recall"].splitlines() if "Deploy keys" in ln)
        return AIMessage(f"From the notes: {line.strip()}")

    return [search, recall, answer]


def run_reads(agent: Any, config: dict[str, Any]) -> None:
    agent.invoke({"messages": [HumanMessage("Audit every service notes file.")]}, config)


def final_text(agent: Any, config: dict[str, Any]) -> str:
    return text_of(agent.get_state(config).values["messages"][-1])


def check_found(found: dict[str, Any], model: ScriptedChatModel, answer: str) -> None:
    assert found["hidden"], "the planted line was still in the prompt: the test proves nothing"
    assert PLANTED in found["search"]
    assert f"notes/f{PLANTED_FILE:02}" in found["search"] or "read_file" in found["search"]
    assert PLANTED in found["recall"]
    assert PLANTED in answer
    tools = {t["function"]["name"] for t in model.prompt_tools[-1]}
    assert {"recall", "search_history"} <= tools
    assert all(
        not any("search_history" in t["function"]["name"] for t in bound)
        for bound in model.prompt_tools[:1]
    ), "the search tool is bound only once something left the prompt"
    # Excerpts and the summary's archive note say the tool finds their hidden lines, in the
    # calls that bind it and only there.
    for prompt, tools in zip(model.prompts, model.prompt_tools, strict=True):
        bound = any(t["function"]["name"] == "search_history" for t in tools)
        said = "\n".join(text_of(m) for m in prompt)
        assert ("hidden lines: search_history]" in said) <= bound
        assert ("search_history finds any line of them]" in said) <= bound
    # Some call that binds it shows an excerpt naming it (which calls do depends on where the
    # folds fall, and those on token counts that vary with the random ids of tool results).
    named = ["hidden lines: search_history]" in "\n".join(map(text_of, p)) for p in model.prompts]
    assert any(named), "no excerpt names the tool"


def test_the_agent_searches_recalls_and_answers() -> None:
    found: dict[str, Any] = {}
    model = ScriptedChatModel(
        messages=[*(read(n) for n in range(FILES)), *search_then_recall(found)],
        profile={"max_input_tokens": WINDOW},
    )
    memory = ContextMemory(model=model)
    agent = create_agent(
        model,
        [read_file],
        middleware=[memory.middleware()],
        checkpointer=InMemorySaver(),
        store=InMemoryStore(),
    )
    config = {"configurable": {"thread_id": "audit"}, "recursion_limit": 500}
    run_reads(agent, config)
    check_found(found, model, final_text(agent, config))
    reports = memory.get_reports(agent, config)
    assert len(reports) == FILES + 3 and all(r.ok and r.tokens <= r.limit for r in reports)

    # Another thread on the same memory and store never sees the first thread's line.
    other: dict[str, Any] = {}
    model.messages = iter([read(40), read(41), *search_then_recall(other)[:1], "nothing"])
    run_reads(agent, {"configurable": {"thread_id": "other"}, "recursion_limit": 100})
    answer = text_of(model.prompts[-1][-1])
    assert answer.startswith("search_history: no line matches 'deploy keys rotate'"), answer
    assert PLANTED not in answer


@pytest.fixture
def sqlite_file(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "agent.sqlite"


def test_after_a_restart_on_the_sqlite_file(sqlite_file: Path) -> None:
    config = {"configurable": {"thread_id": "audit"}, "recursion_limit": 500}
    first = ScriptedChatModel(
        messages=[*(read(n) for n in range(FILES)), "Read them all."],
        profile={"max_input_tokens": WINDOW},
    )
    with SqliteSaver.from_conn_string(str(sqlite_file)) as saver:
        agent = create_agent(
            first, [read_file], middleware=[ContextMemory(model=first).middleware()],
            checkpointer=saver,
        )  # fmt: skip
        run_reads(agent, config)

    # A new process: new memory, checkpointer and archive, on the same file.
    found: dict[str, Any] = {}
    model = ScriptedChatModel(
        messages=search_then_recall(found), profile={"max_input_tokens": WINDOW}
    )
    with SqliteSaver.from_conn_string(str(sqlite_file)) as saver:
        memory = ContextMemory(model=model)
        agent = create_agent(
            model, [read_file], middleware=[memory.middleware()], checkpointer=saver
        )
        agent.invoke({"messages": [HumanMessage("When do deploy keys rotate?")]}, config)
        check_found_after_restart(found, final_text(agent, config))
    with sqlite3.connect(sqlite_file) as conn:  # the archive lives in the checkpointer's file
        assert conn.execute("SELECT count(*) FROM store").fetchone()[0] > FILES


def check_found_after_restart(found: dict[str, Any], answer: str) -> None:
    assert found["hidden"]
    assert PLANTED in found["search"] and PLANTED in found["recall"] and PLANTED in answer


def test_a_tiny_window_gets_recall_alone() -> None:
    """Where the search tool's schema would cost over 5% of the window, it is not bound: it
    would crowd out what it helps find (at 1,500 tokens no summary fitted beside it)."""
    model = ScriptedChatModel(
        messages=[*(read(n) for n in range(8)), "Done."], profile={"max_input_tokens": 1_500}
    )
    memory = ContextMemory(model=model, reserved_output_tokens=300)
    agent = create_agent(
        model, [read_file], middleware=[memory.middleware()], checkpointer=InMemorySaver()
    )
    run_reads(agent, {"configurable": {"thread_id": "tiny"}, "recursion_limit": 100})
    bound = [{t["function"]["name"] for t in tools} for tools in model.prompt_tools]
    assert all("recall" in names for names in bound)
    assert not any("search_history" in names for names in bound)
    assert not any("search_history" in text_of(m) for p in model.prompts for m in p)
