"""One model call through the middleware reads top-down (issue 25).

The shell (`graph/`) asks the pipeline, the pipeline runs the strategies, the strategies edit
the view: traced with `sys.setprofile` over a real `create_agent` run, no function of a lower
layer calls back into the shell. The one way up is the effect runner (`_effects`), which
resumes the plans the layers above hand it: that is how sync and async are written once.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import FrameType
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

import langgraph_ctx
from langgraph_ctx import ContextMemory, ScriptedChatModel
from tests.unit.test_layers import LAYERS, _layer

ROOT = str(Path(langgraph_ctx.__file__).parent)
SHELL = next(i for i, (name, _) in enumerate(LAYERS) if name == "graph")
RUNNER = "langgraph_ctx._effects"


@tool
def read_notes(path: str) -> str:
    """Read a notes file."""
    return f"notes of {path}\n" + "line of notes\n" * 400


def _package_module(frame: FrameType | None) -> tuple[str | None, FrameType | None]:
    while frame is not None and not frame.f_code.co_filename.startswith(ROOT):
        frame = frame.f_back
    return (frame.f_globals.get("__name__") if frame else None), frame


def test_no_call_climbs_back_into_the_shell() -> None:
    read = {"name": "read_notes", "args": {"path": "notes.md"}, "id": "call-1"}
    model = ScriptedChatModel(
        messages=[AIMessage("", tool_calls=[read]), "The notes are read."],
        profile={"max_input_tokens": 4_000},
    )
    memory = ContextMemory(model=model, reserved_output_tokens=1_000)
    agent = create_agent(
        model, [read_notes], middleware=[memory.middleware()], checkpointer=InMemorySaver()
    )
    climbs: list[tuple[str, str, str]] = []
    calls = 0

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal calls
        if event != "call" or not frame.f_code.co_filename.startswith(ROOT):
            return
        callee = frame.f_globals.get("__name__", "")
        caller, _ = _package_module(frame.f_back)
        calls += 1
        if caller is None or caller == RUNNER:
            return
        if _layer(callee) == SHELL and _layer(caller) < SHELL:
            climbs.append((caller, callee, frame.f_code.co_name))

    sys.setprofile(profile)
    try:
        agent.invoke(
            {"messages": [("user", "Read notes.md")]}, {"configurable": {"thread_id": "t"}}
        )
    finally:
        sys.setprofile(None)
    assert calls > 100  # the trace saw the package at work
    assert climbs == []
