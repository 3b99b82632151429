"""Replay machinery behind `langgraph-ctx replay` and `demo`: drive a real agent, record it.

A run is a `create_agent` agent with `ContextMemory(...).middleware()` and a SQLite
checkpointer. `run_turns` (in `runs.py`) feeds it one user turn at a time and records each
model call's `context_cost` report, the prompt the model received and the rebuilds after a
turn; `check_run` then proves nothing was lost: every archived message restores byte for byte
and the full history (archive dumps plus live state) holds every message the run produced.

A recorded conversation is replayed by the package's `ScriptedChatModel` (the recorded AI
turns, in order, see `replay_model`)
and `replay_tools` (one real tool per recorded tool name, answering each call with its
recorded output), so every call goes through the pipeline, the checkpointer and the archive.
"""

from __future__ import annotations

import contextlib
import json
import re
import sqlite3
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ToolMessage,
    messages_from_dict,
)
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, InjectedToolCallId, StructuredTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import create_model

from langgraph_ctx.cli.runs import (
    CallStat,
    InputError,
    RunCheck,
    RunLog,
    check_run,
    run_turns,
    summary_rows,
    write_reports,
)
from langgraph_ctx.scripted import ScriptedChatModel
from langgraph_ctx.tokens.exact import TiktokenCounter

# --- inputs -------------------------------------------------------------------------------


def load_transcript(path: str | Path) -> list[BaseMessage]:
    """Messages from a JSON file holding `messages_to_dict` output.

    Raises:
        InputError: Missing file, not JSON, or not a list of serialized LangChain messages.
    """
    data = _read_json(path, "transcript")
    if not isinstance(data, list):
        msg = (
            f"{path} holds a JSON {type(data).__name__}, not a message list; expected the "
            "output of langchain_core.messages.messages_to_dict(messages)"
        )
        raise InputError(msg)
    try:
        return messages_from_dict(data)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        msg = (
            f"{path} is not a LangChain message list ({type(exc).__name__}: {reason}); expected "
            'items like {"type": "human", "data": {"content": "..."}} from messages_to_dict'
        )
        raise InputError(msg) from exc


def load_strategies(value: str | None) -> list[Any] | None:
    """Strategy configs from JSON text or from a JSON file (None: the default strategies)."""
    if value is None:
        return None
    text = value
    if not value.lstrip().startswith(("[", "{")):
        if not Path(value).is_file():
            msg = f"--strategies {value!r} is neither JSON nor an existing file"
            raise InputError(msg)
        text = Path(value).read_text(encoding="utf-8")
    from langgraph_ctx.strategies import strategies_from_config

    return strategies_from_config(text)  # ConfigError says what is wrong


def load_tools(path: str | Path) -> list[dict[str, Any]]:
    """Tool schemas (OpenAI format, or bare function schemas) from a JSON file."""
    data = _read_json(path, "tools")
    items = data if isinstance(data, list) else [data]
    try:
        return [convert_to_openai_tool(item) for item in items]
    except (TypeError, ValueError, KeyError) as exc:
        msg = f"{path} does not hold tool schemas: {exc}"
        raise InputError(msg) from exc


def _read_json(path: str | Path, what: str) -> Any:
    file = Path(path)
    if not file.is_file():
        msg = f"no such {what} file: {path}"
        raise InputError(msg)
    try:
        return json.loads(file.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        msg = f"{path} is not a UTF-8 text file ({exc.reason})"
        raise InputError(msg) from exc
    except json.JSONDecodeError as exc:
        msg = f"{path} is not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        raise InputError(msg) from exc


def init_model(spec: str) -> BaseChatModel:
    """`init_chat_model("provider:model")`, with any failure turned into one clear line."""
    from langchain.chat_models import init_chat_model

    try:
        return init_chat_model(spec)
    except Exception as exc:  # missing package, missing key, unknown provider
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        msg = f"cannot use model {spec!r}: {first}"
        raise InputError(msg) from exc


# --- chat models ----------------------------------------------------------------------------


NO_MORE_TURNS = "(the recording has no more AI turns)"
"""What the replay model answers once the recording is used up."""


def replay_model(replies: Sequence[AIMessage]) -> ScriptedChatModel:
    """The package's `ScriptedChatModel` replaying recorded AI messages in order.

    Its replies carry the exact tiktoken count of each prompt in `usage_metadata`, as a
    provider would report it, so the hint rebuild after a turn sees real prompt sizes.
    """
    return ScriptedChatModel(
        messages=iter(list(replies)),
        fallback=NO_MORE_TURNS,
        usage_counter=TiktokenCounter("gpt-4o"),
        profile=None,
    )


def end_of_script(model: ScriptedChatModel, replies: int) -> Any:
    """Middleware that ends the agent's turn once the recording has no AI turn left.

    A recording may stop after a tool result (the final submit); the agent would call the model
    once more, and that call is not part of the recording.
    """
    from langchain.agents.middleware import AgentMiddleware, hook_config

    class EndOfScript(AgentMiddleware):  # type: ignore[type-arg]
        @hook_config(can_jump_to=["end"])
        def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
            return {"jump_to": "end"} if len(model.prompts) >= replies else None

    return EndOfScript()


# --- replaying a recording --------------------------------------------------------------------


def with_ids(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """Copies with a stable id (`m00001`, ...) where a message has none, so runs repeat."""
    return [
        m if m.id else m.model_copy(update={"id": f"m{i:05d}"}) for i, m in enumerate(messages, 1)
    ]


def split_turns(messages: Sequence[BaseMessage]) -> list[tuple[list[BaseMessage], int]]:
    """The recording as graph inputs: `(input messages, AI turns the agent then takes)`.

    Inputs are the system and human messages before the agent acts; the agent produces the AI
    and tool messages. A turn ends at an AI message without tool calls (the agent stops
    there), so two such messages in a row make two turns, the second with no input. Trailing
    input with no AI reply after it is left out.
    """
    turns: list[tuple[list[BaseMessage], int]] = []
    inputs: list[BaseMessage] = []
    replies = 0
    for msg in messages:
        if isinstance(msg, ToolMessage):
            continue  # answered by the replay tools
        if not isinstance(msg, AIMessage):
            if replies:
                turns.append((inputs, replies))
                inputs, replies = [], 0
            inputs.append(msg)
            continue
        replies += 1
        if not msg.tool_calls:
            turns.append((inputs, replies))
            inputs, replies = [], 0
    if replies:
        turns.append((inputs, replies))
    return turns


def replay_tools(
    messages: Sequence[BaseMessage], *, calls: list[str] | None = None
) -> list[BaseTool]:
    """One tool per tool name the recording calls, answering with the recorded outputs.

    A call is answered by the recorded `ToolMessage` with its `tool_call_id` (same content,
    status and id); a call the recording never answered gets a short note.

    Args:
        messages: The recording: its AI messages' tool calls give the tools and their argument
            types, its tool messages the answers. Other messages are ignored.
        calls: When given, every call id is appended to it in the order the tools ran.
    """
    outputs = {m.tool_call_id: m for m in messages if isinstance(m, ToolMessage)}
    examples: dict[str, list[dict[str, Any]]] = {}
    for msg in messages:
        if isinstance(msg, AIMessage):
            for call in msg.tool_calls:
                examples.setdefault(call["name"], []).append(dict(call.get("args") or {}))
    return [_replay_tool(name, args, outputs, calls) for name, args in sorted(examples.items())]


def _replay_tool(
    name: str,
    examples: list[dict[str, Any]],
    outputs: Mapping[str, ToolMessage],
    calls: list[str] | None,
) -> BaseTool:
    types: dict[str, set[type]] = {}
    for args in examples:
        for key, value in args.items():
            types.setdefault(key, set()).add(type(value))
    fields: dict[str, Any] = {
        key: (_field_type(seen) | None, None)
        for key, seen in types.items()
        if re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", key)
    }
    fields["tool_call_id"] = (Annotated[str, InjectedToolCallId], ...)
    schema = create_model(f"{_camel(name)}Args", **fields)

    def run(tool_call_id: str, **_: Any) -> ToolMessage:
        if calls is not None:
            calls.append(tool_call_id)
        recorded = outputs.get(tool_call_id)
        if recorded is None:
            note = f"(no output was recorded for this {name} call)"
            return ToolMessage(note, tool_call_id=tool_call_id, name=name, id=f"t-{tool_call_id}")
        return recorded.model_copy(update={"name": recorded.name or name})

    return StructuredTool.from_function(
        func=run,
        name=name,
        description=f"Replays the recorded outputs of the `{name}` tool.",
        args_schema=schema,
    )


def _field_type(seen: set[type]) -> Any:
    return next(iter(seen)) if len(seen) == 1 and next(iter(seen)) in _SIMPLE else Any


_SIMPLE = (str, int, float, bool, list, dict)


def _camel(name: str) -> str:
    return "".join(p.capitalize() for p in re.split(r"[^A-Za-z0-9]+", name) if p) or "Tool"


# --- the checkpointer ---------------------------------------------------------------------------


@contextlib.contextmanager
def open_saver(db: str | Path, *, create: bool = True) -> Iterator[Any]:
    """A `SqliteSaver` on a database file (created with its folder when `create`)."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    path = Path(db)
    if not create and not path.is_file():
        msg = f"no checkpoint database at {db}; pass the --db file a demo or replay wrote"
        raise InputError(msg)
    if create:
        path.parent.mkdir(parents=True, exist_ok=True)
    # The graph runs its nodes in worker threads: the connection is shared across them.
    conn = sqlite3.connect(str(path), check_same_thread=False)
    try:
        try:
            saver = SqliteSaver(conn)
            saver.setup()
        except sqlite3.DatabaseError as exc:
            msg = f"{db} is not a checkpoint database: {exc}"
            raise InputError(msg) from exc
        yield saver
    finally:
        conn.close()


def thread_ids(saver: Any) -> list[str]:
    """Every thread id the checkpoint database holds."""
    rows = saver.conn.execute("SELECT DISTINCT thread_id FROM checkpoints ORDER BY thread_id")
    return [str(r[0]) for r in rows]


def prepare_thread(saver: Any, thread: str, *, reset: bool) -> bool:
    """Make sure `thread` starts empty: delete it when `reset`, else refuse an existing one.

    Returns whether an earlier run was deleted.
    """
    if thread not in thread_ids(saver):
        return False
    if not reset:
        msg = (
            f"thread {thread!r} already exists in the database; pass another --thread (or "
            "remove the --db file) so this run does not mix with the old one"
        )
        raise InputError(msg)
    saver.delete_thread(thread)
    return True


def _clear_archive(archive_dir: Path, thread: str) -> None:
    # A reset thread starts with an empty archive too: its message-id index would otherwise
    # point at the earlier run's messages. DirectoryBackend keeps a thread's entries under
    # <root>/langgraph_ctx/<thread>/ (ids of this shape are used as they are).
    import shutil

    from langgraph_ctx.archive.archive import NAMESPACE_ROOT

    if re.fullmatch(r"[A-Za-z0-9_-]{1,128}", thread):
        shutil.rmtree(archive_dir / NAMESPACE_ROOT / thread, ignore_errors=True)


def _copy_db(source: Path, target: Path) -> None:
    """Copy a SQLite database with SQLite's backup API (consistent, WAL included)."""
    with (
        contextlib.closing(sqlite3.connect(str(source))) as src,
        contextlib.closing(sqlite3.connect(str(target))) as dst,
    ):
        src.backup(dst)


class _Earlier:
    """A copy of the checkpoint database and the thread's archive, taken before a reset.

    `restore` puts both back (after a failed run), `discard` drops the copy.
    """

    def __init__(self, db: Path, archive_dir: Path, thread: str) -> None:
        import shutil
        import tempfile

        from langgraph_ctx.archive.archive import NAMESPACE_ROOT

        self.db = db
        self.folder = archive_dir / NAMESPACE_ROOT / thread
        self.copy = Path(tempfile.mkdtemp(prefix="langgraph-ctx-earlier-"))
        self.had_db = db.is_file()
        if self.had_db:
            _copy_db(db, self.copy / "db.sqlite")
        self.had_archive = self.folder.is_dir()
        if self.had_archive:
            shutil.copytree(self.folder, self.copy / "archive")

    def restore(self) -> bool:
        """Put the earlier database and archive back; False when there was none to keep."""
        import shutil

        if not self.had_db:
            self.discard()
            return False
        _copy_db(self.copy / "db.sqlite", self.db)
        shutil.rmtree(self.folder, ignore_errors=True)
        if self.had_archive:
            shutil.copytree(self.copy / "archive", self.folder)
        self.discard()
        return True

    def discard(self) -> None:
        """Drop the copy."""
        import shutil

        shutil.rmtree(self.copy, ignore_errors=True)


class CheckpointView:
    """Just enough of a compiled graph for `ContextMemory`'s thread views, on a checkpointer.

    Lets `inspect` read a thread written by any graph shape.
    """

    def __init__(self, saver: Any) -> None:
        self.saver = saver

    def get_state(self, config: RunnableConfig) -> Any:
        """The newest checkpoint's values (`.values`)."""
        item = self.saver.get_tuple(config)
        values = dict(item.checkpoint.get("channel_values") or {}) if item else {}
        return _Values(values)

    def get_state_history(self, config: RunnableConfig) -> Iterator[Any]:
        """Every checkpoint's values, newest first."""
        for item in self.saver.list(config):
            yield _Values(dict(item.checkpoint.get("channel_values") or {}))


@dataclass
class _Values:
    values: dict[str, Any]


# --- whole runs ---------------------------------------------------------------------------------


@dataclass
class RunResult:
    """A finished run: the log, the loss check, the table rows and where the files are."""

    log: RunLog
    check: RunCheck | None
    rows: list[tuple[str, str]]
    files: dict[str, str]
    notes: list[str] = field(default_factory=list)
    answer: str = ""
    """The agent's last text answer."""


def execute(
    *,
    model: Any,
    tools: Sequence[BaseTool],
    turns: Sequence[list[BaseMessage]],
    memory: Any,
    db: Path,
    archive_dir: Path,
    thread: str,
    reset: bool,
    reports: Path,
    system_prompt: str | None = None,
    middleware: Sequence[Any] = (),
    recursion_limit: int = 1_000,
    on_call: Callable[[CallStat], None] | None = None,
    meta: Mapping[str, Any] | None = None,
) -> RunResult:
    """Run `turns` through a `create_agent` agent with `memory` on a SQLite thread, then check."""
    from langchain.agents import create_agent

    notes: list[str] = []
    earlier = _Earlier(db, archive_dir, thread) if reset else None
    with open_saver(db) as saver:
        existed = prepare_thread(saver, thread, reset=reset)
        if existed:
            notes.append(f"thread {thread!r} from an earlier run was reset")
        if reset:
            _clear_archive(archive_dir, thread)
        agent = create_agent(
            model,
            list(tools),
            system_prompt=system_prompt,
            middleware=[memory.middleware(), *middleware],
            checkpointer=saver,
        )
        config: RunnableConfig = {
            "configurable": {"thread_id": thread},
            "recursion_limit": recursion_limit,
        }
        counter = memory.manager.token_counter
        log = run_turns(
            agent,
            turns,
            config,
            counter=counter if isinstance(counter, TiktokenCounter) else None,
            system_prompt=system_prompt,
            on_call=on_call,
        )
        check = check_run(memory, agent, config, log) if log.calls else None
    if earlier is not None and log.error and existed and earlier.restore():
        # A failed run keeps the earlier run's thread, archive and reports; its own reports
        # go beside them.
        notes[:] = [f"the run failed: thread {thread!r} and its reports keep the earlier run"]
        stem = reports.name.removesuffix(".json").removesuffix(".reports")
        reports = reports.with_name(f"{stem}.failed.reports.json")
    elif earlier is not None:
        earlier.discard()
    files = {
        "checkpoints": f"{db} (thread {thread})",
        "archive": str(archive_dir),
        "reports": str(write_reports(reports, log, meta={**(meta or {}), "thread": thread})),
    }
    answers = [
        m.text
        for m in log.produced.values()
        if isinstance(m, AIMessage) and not m.tool_calls and m.text
    ]
    rows = summary_rows(log, check)
    return RunResult(
        log=log,
        check=check,
        rows=rows,
        files=files,
        notes=notes,
        answer=answers[-1] if answers else "",
    )


def replay(
    path: str | Path,
    *,
    window: int,
    reserved: int = 0,
    strategies: str | None = None,
    summarizer: str | None = None,
    db: Path,
    archive_dir: Path,
    thread: str | None = None,
    reports: Path | None = None,
    on_start: Callable[[int], None] | None = None,
    on_call: Callable[[CallStat], None] | None = None,
) -> RunResult:
    """Replay a recorded conversation through a real agent graph with `ContextMemory`."""
    from langgraph_ctx.archive._backends import DirectoryBackend
    from langgraph_ctx.graph.memory import ContextMemory
    from langgraph_ctx.summaries.summarizer import Summarizer

    messages = with_ids(load_transcript(path))
    if not any(isinstance(m, AIMessage) for m in messages):
        msg = f"{path} has no AI messages: there is nothing to replay"
        raise InputError(msg)
    built = load_strategies(strategies)
    summary_model = Summarizer(model=init_model(summarizer)) if summarizer else Summarizer()
    tools = replay_tools(messages)
    memory = ContextMemory(
        context_window_tokens=window,
        reserved_output_tokens=reserved,
        strategies=built,
        archive=DirectoryBackend(archive_dir),
        summarizer=summary_model,
        expose_recall="recall" not in {t.name for t in tools},
    )
    turns = split_turns(messages)
    replies = [m for m in messages if isinstance(m, AIMessage)]
    model = replay_model(replies)
    if on_start is not None:
        on_start(len(replies))
    stem = re.sub(r"[^A-Za-z0-9_-]+", "-", Path(path).stem)[:100] or "replay"
    thread_id = thread or f"replay-{stem}"
    result = execute(
        model=model,
        tools=tools,
        turns=[inputs for inputs, _ in turns],
        memory=memory,
        db=db,
        archive_dir=archive_dir,
        thread=thread_id,
        reset=thread is None,
        reports=reports or db.with_name(f"{thread_id}.reports.json"),
        middleware=[end_of_script(model, len(replies))],
        recursion_limit=4 * len(replies) + 100,
        on_call=on_call,
        meta={"source": str(path), "window": window, "reserved": reserved},
    )
    skipped = sum(1 for m in messages if m.id not in result.log.produced)
    if skipped and not result.log.error:
        result.notes.append(f"{skipped} recorded message(s) were not replayed (no AI turn after)")
    return result
