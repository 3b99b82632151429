"""Stored threads behind `langgraph-ctx inspect`, `restore` and `compact`.

`inspect_thread` reads what a demo or replay stored: live state, ledger, reports, the full
history, and every edit the reports record with the archive references that restore it
(`thread_edits`). `restore_entry` reads one archive entry back, verified; `compact_transcript`
builds a transcript down to a budget.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig

from langgraph_ctx._effects import run_plan
from langgraph_ctx._ids import RefKind
from langgraph_ctx.archive.codec import encode_message
from langgraph_ctx.errors import ArchiveError, InputError, shorten
from langgraph_ctx_tools.cli.checkpoints import (
    CheckpointView,
    read_checkpoints,
    thread_archive,
    thread_ids,
)
from langgraph_ctx_tools.cli.edits import EDITS, changed, edit_of
from langgraph_ctx_tools.cli.playback import load_strategies, load_transcript

_THREADS_LISTED = 10


def unknown_thread(thread: str, where: str | Path, known: Sequence[str]) -> InputError:
    """The one error for a thread that a database or an archive folder does not hold.

    It names the thread and where it was looked for, and lists the threads that are there
    (the first ten, then `...`), so the next command can be typed from it. Every command
    that takes `--thread` raises this error, so they all read the same and exit 2.
    """
    listed = ", ".join(known[:_THREADS_LISTED]) + (" ..." if len(known) > _THREADS_LISTED else "")
    msg = f"no thread {shorten(thread)} in {where}; threads there: {listed or 'none'}"
    return InputError(msg)


@contextlib.contextmanager
def opened_thread(
    db: str | Path, thread: str, archive_dir: Path
) -> Iterator[tuple[Any, Any, Any, RunnableConfig]]:
    """A thread of a checkpoint database, read only: `(saver, archive backend, memory, config)`.

    The memory (`ContextMemory` on the thread's archive: the folder, then the database's
    store) reads the thread's views; a thread the database lacks is an `InputError` naming
    those it has.
    """
    from langgraph_ctx.graph.memory import ContextMemory

    with read_checkpoints(db, [thread]) as opened:
        known = thread_ids(opened.saver)
        if thread not in known:
            raise unknown_thread(thread, db, known)
        backend = thread_archive(archive_dir, opened)
        memory = ContextMemory(context_window_tokens=1, archive=backend)
        yield opened.saver, backend, memory, {"configurable": {"thread_id": thread}}


def inspect_thread(db: str | Path, thread: str, archive_dir: Path) -> dict[str, Any]:
    """What a stored thread holds: ledger, summary, reports, live and full history, edits."""
    from langgraph_ctx.archive.archive import Archive
    from langgraph_ctx.ledger.repair import repair_ledger

    with opened_thread(db, thread, archive_dir) as (saver, archive, memory, config):
        view = CheckpointView(saver)
        values = view.get_state(config).values
        reports = memory.get_reports(view, config)
        # What the archive cannot give back is named; the rest of the history is still shown.
        full: list[BaseMessage] | None = memory.get_full_history(view, config)
        unreadable = getattr(full, "unreadable", [])
        full_error = "; ".join(reason for _, reason in unreadable) or None
        live = list(values.get("messages") or [])
        # A ledger is read as the pipeline reads it: a part of the wrong shape is left out.
        ledger, repairs = repair_ledger(values.get("context_ledger"))
        edits = thread_edits(reports, Archive(archive, thread_id=thread), {m.id for m in live})
    return {
        "live": live,
        "ledger": dict(ledger),
        "ledger_repairs": repairs,
        "reports": reports,
        "full": full,
        "full_error": full_error,
        "edits": edits,
    }


@dataclass
class ThreadEdit:
    """One kind of edit over a thread's life, with how to get its messages back."""

    kind: str
    """The edit, as `langgraph_ctx_tools.cli.edits.EDITS` names it (`excerpted`, ...)."""
    edits: int
    """Decisions of this kind that changed the prompt."""
    message_ids: list[str]
    """Every message they touched, oldest first, once."""
    refs: list[str]
    """Archive references that restore them (a compacted output, a dump of many)."""
    live: int
    """How many of the messages are still in live state (the prompt only showed them less)."""


def thread_edits(
    reports: Sequence[Any], archive: Any, live_ids: set[str | None]
) -> list[ThreadEdit]:
    """Every edit the thread's reports record, by kind, with the references to restore from.

    A message the archive holds is restorable by its reference (`restore REF`) or its id; one
    still in live state was only shown differently in the prompt and is in the thread as is.
    """
    found: dict[str, ThreadEdit] = {}
    for report in reports:
        for d in report.decisions:
            word = edit_of(d)
            if word is None or not changed(d):
                continue
            edit = found.setdefault(word, ThreadEdit(word, 0, [], [], 0))
            edit.edits += 1
            edit.message_ids.extend(i for i in d.message_ids if i not in edit.message_ids)
            detail = d.detail or {}
            for ref in [*(detail.get("refs") or []), detail.get("dump_ref")]:
                if ref and ref not in edit.refs:
                    edit.refs.append(str(ref))
    for edit in found.values():
        edit.live = sum(1 for i in edit.message_ids if i in live_ids)
        # A shortened turn was archived whole by its id before the edit (its decision names
        # no reference); the others were archived later (a dump), or not at all.
        shortened = edit.kind == "shortened"
        if shortened or edit.kind in {"pruned", "left the window", "memory dropped"}:
            for message_id in edit.message_ids:
                looked_up = shortened or message_id not in live_ids
                ref = _lookup(archive, message_id) if looked_up else None
                if ref and ref not in edit.refs:
                    edit.refs.append(ref)
    return [found[word] for word in EDITS if word in found]


def _lookup(archive: Any, message_id: str) -> str | None:
    try:
        found: str | None = archive.lookup(message_id)
    except ArchiveError:
        return None
    return found


def readable_entry(data: bytes) -> str:
    """An entry's bytes (`restore_entry`) as a person reads them.

    Each message gets a header line (its type, name, ids and tool calls), then its text; a
    text entry is shown as it is.
    """
    from langgraph_ctx.archive.codec import decode_message, decode_messages

    entry: BaseMessage | list[BaseMessage] | str
    try:
        entry = decode_message(data)
    except Exception:
        try:
            entry = decode_messages(data)
        except Exception:
            entry = data.decode("utf-8", "surrogatepass")
    return "\n".join(entry_parts(entry))


def entry_parts(entry: BaseMessage | Sequence[BaseMessage] | str) -> list[str]:
    """The lines `readable_entry` joins: per message its header line, then its text.

    `langgraph-ctx view` keeps these parts apart, so a text shared by many entries is stored once.
    """
    from langgraph_ctx.archive.recall import entry_text

    if isinstance(entry, str):
        return [entry]
    parts = []
    for message in [entry] if isinstance(entry, BaseMessage) else entry:
        head = [f"[{message.type}"]
        for key in ("name", "tool_call_id", "id"):
            value = getattr(message, key, None)
            if value:
                head.append(f"{key}={value}")
        calls = getattr(message, "tool_calls", None) or []
        called = "; ".join(
            f"{c['name']}({json.dumps(c['args'], ensure_ascii=False)})" for c in calls
        )
        parts.append(" ".join(head) + "]" + (f" calls {called}" if called else ""))
        parts.append(entry_text(message))
    return parts


def restore_entry(ref_or_id: str, *, thread: str, archive_dir: Path) -> bytes:
    """The archived bytes of one entry (a message, a dump or a text), verified."""
    from langgraph_ctx.archive._backends import DirectoryBackend
    from langgraph_ctx.archive.archive import Archive
    from langgraph_ctx.archive.codec import encode_messages

    if not archive_dir.is_dir():
        msg = f"no archive directory at {archive_dir}; pass the --archive a run wrote"
        raise InputError(msg)
    archive = Archive(DirectoryBackend(archive_dir), thread_id=thread)
    # A thread the folder holds nothing of is a wrong --thread (exit 2, the threads listed),
    # not a missing entry of a real thread.
    if not any(run_plan(archive.plan_refs(kind)) for kind in get_args(RefKind)):
        raise unknown_thread(thread, archive_dir, archived_threads(archive_dir))
    entry = archive.read(ref_or_id)
    if isinstance(entry, BaseMessage):
        return encode_message(entry)
    if isinstance(entry, list):
        return encode_messages(entry)
    return entry.encode("utf-8", "surrogatepass")


def archived_threads(archive_dir: Path) -> list[str]:
    """The threads a `DirectoryBackend` folder holds entries of, sorted.

    Each is a folder `<archive_dir>/langgraph_ctx/<thread>/` holding entry folders (`message`,
    `messages`, `text`); a thread id that is not path-safe is stored, and listed, as `~` and
    its sha256. Threads of a user scope (`<user>/<thread>/`) are not listed.
    """
    from langgraph_ctx.archive.archive import NAMESPACE_ROOT

    kinds = get_args(RefKind)
    root = archive_dir / NAMESPACE_ROOT
    try:
        folders = [p for p in root.iterdir() if p.is_dir() and not p.is_symlink()]
    except OSError:  # no such folder, or not one
        return []
    return sorted(p.name for p in folders if any((p / kind).is_dir() for kind in kinds))


def compact_transcript(
    path: str | Path,
    *,
    window: int,
    reserved: int = 0,
    strategies: str | None = None,
    archive_dir: Path,
    thread: str,
) -> tuple[list[BaseMessage], Any, int]:
    """A transcript built down to a budget: `(prompt, report, tokens before)`."""
    from langgraph_ctx.archive._backends import DirectoryBackend
    from langgraph_ctx.archive.archive import Archive
    from langgraph_ctx.pipeline.manager import ContextManager
    from langgraph_ctx.strategies import default_strategies

    messages = load_transcript(path)
    built = load_strategies(strategies) or default_strategies()
    manager = ContextManager(
        context_window_tokens=window,
        reserved_output_tokens=reserved,
        strategies=built,
        archive=Archive(DirectoryBackend(archive_dir), thread_id=thread),
    )
    before = manager.token_counter(messages)
    result = manager.build(messages)
    return result.messages, result.report, before
