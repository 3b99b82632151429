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

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, InjectedToolCallId, StructuredTool
from pydantic import BaseModel, Field

from langgraph_ctx._patterns import compile_pattern
from langgraph_ctx.cli.playback import init_model
from langgraph_ctx.cli.replay import RunResult, execute
from langgraph_ctx.cli.runs import CallStat
from langgraph_ctx.errors import InputError
from langgraph_ctx.strategies import default_strategies

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

SKIP_DIRS = frozenset({"__pycache__", "node_modules", "build", "dist"})
MAX_LINES = 100
"""Most lines one `read_file` call returns."""
MAX_LINE_CHARS = 2_000
"""Longest line `read_file` shows (a minified file is one line of megabytes)."""
MAX_ENTRIES = 500
"""Most entries one `list_dir` call shows."""
MAX_MATCHES = 40
"""Most matches one `search_text` call returns."""
MAX_FILE_BYTES = 2_000_000
"""Largest file a tool reads."""
MAX_WALK_FILES = 5_000
"""Most files one `search_text` call looks at."""
SEARCH_SECONDS = 2.0
"""Time budget of one `search_text` call; a pattern that needs more gets an error result."""


class ListDirArgs(BaseModel):
    """Arguments of `list_dir`."""

    path: str = Field(default=".", description="Folder to list, relative to the root.")
    tool_call_id: Annotated[str, InjectedToolCallId]


class ReadFileArgs(BaseModel):
    """Arguments of `read_file`."""

    path: str = Field(description="File to read, relative to the root.")
    start_line: int = Field(default=1, description="First line, 1-based.")
    end_line: int | None = Field(default=None, description="Last line, inclusive.")
    tool_call_id: Annotated[str, InjectedToolCallId]


class SearchTextArgs(BaseModel):
    """Arguments of `search_text`."""

    pattern: str = Field(description="Case-insensitive regular expression (Python syntax).")
    path: str = Field(default=".", description="Folder or file to search, relative to the root.")
    tool_call_id: Annotated[str, InjectedToolCallId]


def make_tools(root: str | Path) -> list[BaseTool]:
    """`list_dir`, `read_file` and `search_text`, confined to `root` and read-only.

    Each returns a `ToolMessage` with id `t-<tool_call_id>` (so runs repeat byte for byte); a
    bad path or pattern comes back as an error result the agent can act on.
    """
    base = Path(root).resolve()

    def wrap(fn: Callable[..., str], name: str) -> Callable[..., ToolMessage]:
        def run(tool_call_id: str, **kwargs: Any) -> ToolMessage:
            try:
                text, status = fn(**kwargs), "success"
            except (OSError, ValueError) as exc:  # a pattern error is a ValueError
                text, status = f"Error: {exc}", "error"
            return ToolMessage(
                text, tool_call_id=tool_call_id, name=name, status=status, id=f"t-{tool_call_id}"
            )

        return run

    def list_dir(path: str = ".") -> str:
        folder = _inside(base, path)
        if not folder.is_dir():
            msg = f"{path} is not a folder"
            raise ValueError(msg)
        lines = [f"{_rel(base, folder)}/"]
        outside = hidden = 0
        for entry in sorted(folder.iterdir(), key=lambda p: (p.is_file(), p.name)):
            if entry.name.startswith(".") or entry.name in SKIP_DIRS:
                continue
            if not _within(base, entry):
                outside += 1
            elif len(lines) > MAX_ENTRIES:
                hidden += 1
            elif entry.is_dir():
                lines.append(f"dir  {_rel(base, entry)}/")
            elif entry.is_file():
                count = _line_count(entry)
                size = entry.stat().st_size
                lines.append(f"file {_rel(base, entry)}  {count} lines  {size:,} bytes")
        if hidden:
            lines.append(f"({hidden} more entries not shown; list a sub-folder)")
        if outside:
            lines.append(f"({outside} link(s) leading out of the folder not shown)")
        return "\n".join(lines)

    def read_file(path: str, start_line: int = 1, end_line: int | None = None) -> str:
        file = _inside(base, path)
        text = _text(file)
        lines = text.splitlines()
        first = max(1, start_line)
        last = min(len(lines), end_line or len(lines), first + MAX_LINES - 1)
        if lines and first > len(lines):
            msg = f"{_cut(path)} has {len(lines)} lines; start_line {start_line} is past the end"
            raise ValueError(msg)
        body = "\n".join(
            f"{i:5}| {_cut(lines[i - 1], MAX_LINE_CHARS)}" for i in range(first, last + 1)
        )
        out = f"{_rel(base, file)} (lines {first}-{last} of {len(lines)})\n{body}"
        if last < len(lines):
            out += f"\n[more: call read_file with start_line={last + 1}]"
        return out

    def search_text(pattern: str, path: str = ".") -> str:
        compiled = compile_pattern(pattern)
        target = _inside(base, path)
        walk = Walk([target]) if target.is_file() else _walk(base, target)
        deadline = time.monotonic() + SEARCH_SECONDS
        found: list[str] = []
        total = 0
        for file in sorted(walk.files):
            try:
                text = _text(file)
            except ValueError:
                continue
            for number, line in enumerate(text.splitlines(), 1):
                if compiled.search(line, deadline):
                    total += 1
                    if len(found) < MAX_MATCHES:
                        found.append(f"{_rel(base, file)}:{number}: {line.strip()[:160]}")
        head = f"{total} matches for /{_cut(pattern)}/ under {_cut(path)}"
        if total > len(found):
            head += f" (first {len(found)} shown)"
        notes = walk.notes()
        return "\n".join([head, *found, *notes])

    specs: list[tuple[Callable[..., str], type[BaseModel], str]] = [
        (list_dir, ListDirArgs, "List a folder: sub-folders and files with line counts."),
        (read_file, ReadFileArgs, f"Read up to {MAX_LINES} numbered lines of a text file."),
        (search_text, SearchTextArgs, "Search text files for a regular expression."),
    ]
    return [
        StructuredTool.from_function(
            func=wrap(fn, fn.__name__), name=fn.__name__, description=desc, args_schema=schema
        )
        for fn, schema, desc in specs
    ]


def _inside(base: Path, path: str) -> Path:
    target = (base / path).resolve()
    if target != base and base not in target.parents:
        msg = f"{_cut(path)} is outside the folder being explored"
        raise ValueError(msg)
    if not target.exists():
        msg = f"{_cut(path)} does not exist"
        raise ValueError(msg)
    return target


def _rel(base: Path, path: Path) -> str:
    return "." if path == base else path.relative_to(base).as_posix()


def _cut(text: str, limit: int = 80) -> str:
    """`text`, cut to `limit` characters: a tool's answer quotes its input bounded."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _within(base: Path, entry: Path) -> bool:
    """Whether `entry`, its links followed, is inside `base` (a link out is not)."""
    try:
        return entry.resolve().is_relative_to(base)
    except (OSError, RuntimeError):  # a link loop, a vanished file
        return False


@dataclass
class Walk:
    """The files a walk found, and what it left out."""

    files: list[Path] = field(default_factory=list)
    outside: int = 0
    """Links leading out of the explored folder, skipped."""
    repeated: int = 0
    """Folders reached again through a link (walked once)."""
    capped: bool = False
    """The walk stopped at `MAX_WALK_FILES`."""

    def notes(self) -> list[str]:
        """One line per thing left out."""
        notes = []
        if self.outside:
            notes.append(f"({self.outside} link(s) leading out of the folder skipped)")
        if self.repeated:
            notes.append(f"({self.repeated} folder(s) reached again through a link walked once)")
        if self.capped:
            notes.append(f"(stopped after {MAX_WALK_FILES:,} files; search a sub-folder)")
        return notes


def _walk(base: Path, folder: Path) -> Walk:
    """The files under `folder` whose real paths are inside `base`, each folder walked once."""
    walk = Walk()
    seen: set[Path] = set()
    pending = [folder]
    while pending:  # iterative and bounded: links cannot make it recurse or loop
        current = pending.pop()
        real = current.resolve()
        if real in seen:
            walk.repeated += 1
            continue
        seen.add(real)
        for entry in sorted(current.iterdir()):
            if entry.name.startswith(".") or entry.name in SKIP_DIRS:
                continue
            if not _within(base, entry):
                walk.outside += 1
            elif entry.is_dir():
                pending.append(entry)
            elif entry.is_file():
                if len(walk.files) >= MAX_WALK_FILES:
                    walk.capped = True
                    return walk
                walk.files.append(entry)
    return walk


def _text(file: Path) -> str:
    if not file.is_file():
        msg = f"{file.name} is not a file"
        raise ValueError(msg)
    if file.stat().st_size > MAX_FILE_BYTES:
        msg = f"{file.name} is larger than {MAX_FILE_BYTES:,} bytes"
        raise ValueError(msg)
    data = file.read_bytes()
    if b"\0" in data[:4096]:
        msg = f"{file.name} is a binary file"
        raise ValueError(msg)
    return data.decode("utf-8", "replace")


def _line_count(file: Path) -> int:
    try:
        return len(_text(file).splitlines())
    except ValueError:
        return 0


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
    from langgraph_ctx.cli.explorer import ScriptedExplorer
    from langgraph_ctx.graph.memory import ContextMemory
    from langgraph_ctx.summaries.summarizer import Summarizer

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
