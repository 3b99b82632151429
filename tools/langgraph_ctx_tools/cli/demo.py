"""`langgraph-ctx demo`: a real agent with real tools over a real tree, in a small window.

The agent is `langchain.agents.create_agent` with `ContextMemory(...).middleware()`, three
read-only tools over a local folder (`list_dir`, `read_file`, `search_text`) and the `recall`
tool, on embedded defaults: a SQLite checkpointer file, a directory archive, offline token
counting and the deterministic summarizer. Without `--model` the moves come from
`ScriptedExplorer` (offline, deterministic); with `--model provider:model` a real model drives.

The memory runs the defaults the README describes (`default_strategies()`, the default hint
threshold): a large tool output is shown as its excerpt as it arrives (the original archived),
an older model turn that called a tool is shortened to its first and last lines, and when the
prompt passes the trigger the oldest turns leave the window for a summary that quotes the
lines of tool output the agent used. The window is small on purpose (6,000 tokens by default)
so that all of it happens in a few dozen calls, and a finished turn can trigger a hint rebuild.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage

from langgraph_ctx.errors import InputError
from langgraph_ctx.strategies import default_strategies
from langgraph_ctx_tools.cli.folder_tools import make_tools
from langgraph_ctx_tools.cli.playback import init_model
from langgraph_ctx_tools.cli.replay_command import RunResult, execute
from langgraph_ctx_tools.cli.runs import CallStat

DEFAULT_WINDOW = 6_000
"""The demo's context window in tokens."""
DEFAULT_STEPS = 12
"""Model calls allowed per user request."""
DEFAULT_HOME = Path(".langgraph_ctx")
"""Where the demo keeps its files, relative to the working directory."""

SYSTEM_PROMPT = (
    "You explore a folder of source files with the tools list_dir, read_file and search_text "
    "(paths are relative to the folder root). Take one step at a time, do not repeat a step "
    "you already took, and answer each request briefly when you know enough. When an output "
    "was compacted, call recall with its reference to read it back."
)
"""The demo agent's system prompt."""

REQUESTS = (
    "Map this code base: list its folders and read the main files.",
    "Find where tokens are counted.",
    "Find where messages are archived.",
    "Read the largest file further.",
    "Summarize what you learned.",
)
"""The user turns of the demo, in order."""


def stable_tool_ids() -> Any:
    """Middleware giving every tool result without an id the id `t-<tool_call_id>`.

    Tool results (the `recall` tool's too) would otherwise get random ids, and archive
    references and token counts would change from run to run.
    """
    from langchain.agents.middleware import wrap_tool_call

    @wrap_tool_call(name="StableToolIds")
    def stable(request: Any, handler: Callable[[Any], Any]) -> Any:
        result = handler(request)
        if isinstance(result, ToolMessage) and not result.id:
            result = result.model_copy(update={"id": f"t-{result.tool_call_id}"})
        return result

    return stable


def default_root() -> Path:
    """The package's own sources."""
    import langgraph_ctx

    return Path(langgraph_ctx.__file__).parent


def run_demo(
    *,
    root: Path | None = None,
    window: int = DEFAULT_WINDOW,
    model: str | None = None,
    db: Path | None = None,
    archive_dir: Path | None = None,
    thread: str | None = None,
    steps: int = DEFAULT_STEPS,
    on_call: Callable[[CallStat], None] | None = None,
) -> RunResult:
    """Run the demo agent over `root` and check the run. See the module docstring."""
    from langchain.agents.middleware import ModelCallLimitMiddleware

    from langgraph_ctx.archive._backends import DirectoryBackend
    from langgraph_ctx.graph.memory import ContextMemory
    from langgraph_ctx.summaries.summarizer import Summarizer
    from langgraph_ctx_tools.cli.explorer import ScriptedExplorer

    root = (root or default_root()).resolve()
    if not root.is_dir():
        msg = f"{root} is not a folder; give the demo a folder to explore"
        raise InputError(msg)
    if steps < 1:
        msg = f"--steps must be at least 1, got {steps}"
        raise InputError(msg)
    db = db or DEFAULT_HOME / "demo.sqlite"
    archive_dir = archive_dir or DEFAULT_HOME / "archive"
    chat = init_model(model) if model else ScriptedExplorer()
    memory = ContextMemory(
        model=chat if model else None,
        context_window_tokens=window,
        archive=DirectoryBackend(archive_dir),
        summarizer=Summarizer(),
        strategies=default_strategies(),  # what `ContextMemory()` runs, stated for the reader
    )
    turns: list[list[BaseMessage]] = [
        [HumanMessage(text, id=f"user-{i}")] for i, text in enumerate(REQUESTS, 1)
    ]
    thread_id = thread or "demo"
    result = execute(
        model=chat,
        tools=make_tools(root),
        turns=turns,
        memory=memory,
        db=db,
        archive_dir=archive_dir,
        thread=thread_id,
        reset=thread is None,
        reports=db.with_name(f"{thread_id}.reports.json"),
        system_prompt=SYSTEM_PROMPT,
        middleware=[
            ModelCallLimitMiddleware(run_limit=steps, exit_behavior="end"),
            stable_tool_ids(),
        ],
        recursion_limit=4 * steps + 20,
        on_call=on_call,
        meta={"root": str(root), "window": window, "model": model or "scripted explorer"},
    )
    result.files = {"explored": str(root), **result.files}
    return result
