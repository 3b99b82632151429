"""The runs behind `langgraph-ctx replay` and `demo`: drive a real agent, record it, check it.

A run is a `create_agent` agent with `ContextMemory(...).middleware()` on a SQLite
checkpointer (`execute`): `run_turns` (`recorder`) records it call by call, and `check_run`
(`runs`) then proves nothing was lost. `replay` plays a recorded conversation back through
such an agent with the recorded AI turns and tool outputs (`playback`), so every call goes
through the pipeline, the checkpointer and the archive.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import sqlite3
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool

from langgraph_ctx.archive.archive import NAMESPACE_ROOT
from langgraph_ctx.errors import InputError
from langgraph_ctx.tokens.exact import TiktokenCounter
from langgraph_ctx_tools.cli.checkpoints import thread_ids, write_checkpoints
from langgraph_ctx_tools.cli.playback import (
    end_of_script,
    init_model,
    load_strategies,
    load_transcript,
    replay_model,
    replay_tools,
    split_turns,
    with_ids,
)
from langgraph_ctx_tools.cli.recorder import run_turns
from langgraph_ctx_tools.cli.runs import (
    CallStat,
    RunCheck,
    RunLog,
    check_run,
    summary_rows,
    write_reports,
)

# --- the checkpointer ---------------------------------------------------------------------------


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
        shutil.rmtree(self.copy, ignore_errors=True)


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
    with write_checkpoints(db) as saver:
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
    replies = [m for m in log.produced.values() if isinstance(m, AIMessage) and not m.tool_calls]
    answer = next((m.text for m in reversed(replies) if m.text), "")  # the last one in words
    rows = summary_rows(log, check)
    return RunResult(log=log, check=check, rows=rows, files=files, notes=notes, answer=answer)


def _file_stem(text: str) -> str:
    """`text` as a file name's stem: a thread id may hold `/` or `..`, a file name may not."""
    return re.sub(r"[^A-Za-z0-9_-]+", "-", text)[:100] or "replay"


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
    name = Path(path).name.removesuffix(".gz")  # run.json.gz: the thread is replay-run
    thread_id = thread or f"replay-{_file_stem(Path(name).stem)}"
    result = execute(
        model=model,
        tools=tools,
        turns=[inputs for inputs, _ in turns],
        memory=memory,
        db=db,
        archive_dir=archive_dir,
        thread=thread_id,
        reset=thread is None,
        reports=reports or db.with_name(f"{_file_stem(thread_id)}.reports.json"),
        middleware=[end_of_script(model, len(replies))],
        recursion_limit=4 * len(replies) + 100,
        on_call=on_call,
        meta={"source": str(path), "window": window, "reserved": reserved},
    )
    skipped = sum(1 for m in messages if m.id not in result.log.produced)
    if skipped and not result.log.error:
        result.notes.append(f"{skipped} recorded message(s) were not replayed (no AI turn after)")
    return result
