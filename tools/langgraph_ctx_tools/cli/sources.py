"""What `langgraph-ctx frontier` replays, and with which window and counter.

Threads come from message JSON files (`messages_to_dict` output, plain or `.json.gz`),
folders of them (`recorded_files`: the one reader of a folder of runs), or a
checkpoint database: a SQLite file or a PostgreSQL URI (with the `postgres` extra), opened
read-only and read as data (`langgraph_ctx_tools.cli.checkpoints`). A thread a `ContextMemory`
managed is read whole (`get_full_history`: live state plus archive), so the messages it
removed from live state are replayed too. Every
problem with the input is an `InputError` with one line saying what to pass instead.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.runnables import RunnableConfig

from langgraph_ctx.errors import InputError, shorten
from langgraph_ctx_tools.cli.checkpoints import (
    CheckpointView,
    read_checkpoints,
    thread_archive,
    thread_ids,
)
from langgraph_ctx_tools.cli.output import say
from langgraph_ctx_tools.cli.playback import load_transcript, with_ids
from langgraph_ctx_tools.cli.threads import unknown_thread

__all__ = [
    "RECORDED_SUFFIXES",
    "Thread",
    "check_room",
    "model_terms",
    "recorded_files",
    "threads_from_db",
    "threads_from_files",
]


@dataclass
class Thread:
    """One recorded thread: where it came from and its messages, oldest first."""

    name: str
    messages: list[BaseMessage]
    unreadable: list[str] = field(default_factory=list)
    """Why part of its history could not be read back from its archive (empty: all of it)."""

    @property
    def calls(self) -> int:
        """The model calls a replay makes: one before each AI message after the first one."""
        return sum(isinstance(m, AIMessage) for m in self.messages[1:])


RECORDED_SUFFIXES = (".json", ".json.gz")
"""The files of a folder read as recorded runs: message JSON, plain or gzip-compressed."""


def recorded_files(folder: Path) -> list[Path]:
    """The files of `folder` (and its sub-folders) that may hold a recorded run, sorted.

    The one rule for what a folder of runs holds, for every command that takes a folder:
    `RECORDED_SUFFIXES` (the repository's own `data/trajectories` is `.json.gz`); whatever
    else sits there (a README, a LICENSE) is not looked at.
    """
    return sorted(
        p for p in folder.rglob("*") if p.name.endswith(RECORDED_SUFFIXES) and p.is_file()
    )


def threads_from_files(paths: Sequence[Path]) -> list[Thread]:
    """Each recorded run of `paths` (files, or folders read by `recorded_files`) as a thread.

    A file named in `paths` must be a recorded thread. A file found in a folder that is not one
    (a `manifest.json` kept beside the runs) is left out with a line on stderr; only a folder
    with no thread left is an error.
    """
    threads = []
    for path in paths:
        if not path.is_dir():
            threads.append(_thread_of(path))  # load_transcript names a missing file
            continue
        found = recorded_files(path)
        kept = []
        for file in found:
            try:
                kept.append(_thread_of(file))
            except InputError as exc:  # "FILE is not ...; expected ...": the reason, short
                reason = str(exc).removeprefix(f"{file} ").split("; ")[0]
                line = f"frontier: left out {file}: not a recorded thread: it {reason}"
                say(line, err=True)  # a file name is data: made inert
        if not kept:
            what = (
                "no .json or .json.gz file"
                if not found
                else "no recorded thread (see the lines above)"
            )
            msg = f"folder {path} holds {what}; pass message JSON files or folders of them"
            raise InputError(msg)
        threads.extend(kept)
    return threads


def _thread_of(file: Path) -> Thread:
    messages = with_ids(load_transcript(file))
    if not any(isinstance(m, AIMessage) for m in messages):
        msg = f"{file} has no AI message: there is no model call to replay"
        raise InputError(msg)
    return Thread(_run_name(file), messages)


def _run_name(file: Path) -> str:
    """The run's name: the file's name without `.json` / `.json.gz` (run1.json.gz: run1)."""
    name = file.name
    for suffix in sorted(RECORDED_SUFFIXES, key=len, reverse=True):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return file.stem


# --- checkpoint databases ------------------------------------------------------------------------


def threads_from_db(
    db: str, only: Sequence[str] | None, archive_dir: Path, notes: list[str]
) -> list[Thread]:
    """The threads of a checkpoint database (every one, or those of `only`).

    Args:
        db: A SQLite file or a `postgresql://` URI.
        only: Thread ids to read (None: every thread).
        archive_dir: The archive folder of threads a `DirectoryBackend` archived; entries
            not there are read from the store in the database itself (where `ContextMemory`
            keeps the archive of a graph with no store), see `thread_archive`.
        notes: Where to say which threads were left out and why.
    """
    from langgraph_ctx.graph.memory import ContextMemory

    threads = []
    with read_checkpoints(db, only or None) as opened:  # no list: every thread
        saver = opened.saver
        known = thread_ids(saver)
        if not known:
            msg = f"{db} holds no thread; record one with a checkpointer first"
            raise InputError(msg)
        missing = [t for t in only or () if t not in known]
        if missing:
            raise unknown_thread(missing[0], db, known)
        # The archive is read where it is, never derived (deriving sets a store up: a write).
        archive = thread_archive(archive_dir, opened)
        memory = ContextMemory(context_window_tokens=1, archive=archive)
        view = CheckpointView(saver)
        for thread in only or known:
            config: RunnableConfig = {"configurable": {"thread_id": thread}}
            values = view.get_state(config).values
            messages: list[BaseMessage] = list(values.get("messages") or [])
            gaps: list[str] = []
            if values.get("context_ledger"):  # managed: what left live state is archived
                full = memory.get_full_history(view, config)
                gaps = [reason for _, reason in getattr(full, "unreadable", [])]
                messages = list(full)
            if not any(isinstance(m, AIMessage) for m in messages):
                notes.append(f"thread {thread} has no AI message: left out")
                continue
            threads.append(Thread(thread, with_ids(messages), gaps))
    if not threads:
        msg = f"no thread of {db} has an AI message: there is no model call to replay"
        raise InputError(msg)
    return threads


# --- window and counter ------------------------------------------------------------------------


def model_terms(
    spec: str | None, window: int | None
) -> tuple[int, Callable[[Sequence[BaseMessage]], int]]:
    """The window (`window`, else the model's profile) and the counter (the model's own).

    Without a model, the exact gpt-4o counter, as the benchmarks count.
    """
    from langgraph_ctx.tokens.exact import TiktokenCounter
    from langgraph_ctx.tokens.models import counter_for_model, offline_profile

    if spec is None:
        if window is None:
            msg = "pass --window TOKENS or --model PROVIDER:MODEL (its profile gives the window)"
            raise InputError(msg)
        return window, TiktokenCounter("gpt-4o")
    name = spec.partition(":")[2] or spec
    counter = counter_for_model(name)
    if window is not None:
        return window, counter
    profile = offline_profile(spec)
    if profile is None:
        from langgraph_ctx_tools.cli.playback import init_model

        profile = dict(getattr(init_model(spec), "profile", None) or {})
    found = profile.get("max_input_tokens")
    if not isinstance(found, int) or isinstance(found, bool) or found <= 0:
        msg = f"the profile of {shorten(spec)} gives no max_input_tokens; pass --window TOKENS"
        raise InputError(msg)
    return found, counter


def check_room(
    threads: Sequence[Thread], limit: int, counter: Callable[[Sequence[BaseMessage]], int]
) -> None:
    """Refuse a budget smaller than a thread's system prompt (no setting could fit a call)."""
    for thread in threads:
        system = [m for m in thread.messages if isinstance(m, SystemMessage)]
        need = counter(system) if system else 0
        if need >= limit:
            msg = (
                f"the budget ({limit:,} tokens: --window less --reserved) is too small for the "
                f"system prompt of {thread.name} ({need:,} tokens); pass a larger --window"
            )
            raise InputError(msg)
