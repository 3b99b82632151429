"""The handlers of the `langgraph-ctx` commands: each runs one command and prints its result.

`commands` parses the arguments and calls the handler the subcommand names; the work happens in
`langgraph_ctx_tools.cli.demo`, `langgraph_ctx_tools.cli.replay_command` and
`langgraph_ctx_tools.cli.threads`, and `langgraph_ctx_tools.cli.output` prints it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any, TypedDict

from langgraph_ctx.errors import InputError, shorten
from langgraph_ctx_tools.cli.output import (
    Output,
    existing_folder,
    plot_target,
    say,
    visible_controls,
)

PROG = "langgraph-ctx"


HOME = Path(".langgraph_ctx")
"""Default folder of the database and archive, relative to the working directory."""
DEFAULT_VIEW_WINDOW = 32_000
"""The window `langgraph-ctx view FILE` replays a message file in unless told."""


def fail(message: str, code: int) -> int:
    """Print `message` on stderr and return the exit code `code`."""
    say(message, err=True)
    return code


class _Budget(TypedDict):
    window: int
    reserved: int
    strategies: str | None


class _Store(TypedDict):
    db: Path
    archive_dir: Path
    thread: str | None


def _budget(args: argparse.Namespace) -> _Budget:
    """The budget options (`--window`, `--reserved`, `--strategies`) as keyword arguments."""
    return {"window": args.window, "reserved": args.reserved, "strategies": args.strategies}


def _store(args: argparse.Namespace) -> _Store:
    """Where a run is kept (`--db`, `--archive`, `--thread`) as keyword arguments."""
    return {"db": args.db, "archive_dir": args.archive, "thread": args.thread}


def handle_demo(args: argparse.Namespace) -> int:
    """`langgraph-ctx demo`; returns the exit code."""
    from langgraph_ctx_tools.cli.demo import run_demo

    out = Output()
    with out.progress("demo agent", None) as on_call:
        result = run_demo(
            root=args.path,
            window=args.window,
            model=args.model,
            steps=args.steps,
            on_call=on_call,
            **_store(args),
        )
    if result.answer:
        out.text("the agent's last answer", _clip_lines(result.answer, 14))
    if result.log.calls:
        _demo_page(args, result)
    title = f"{PROG} demo: {args.model or 'scripted explorer'}, window {args.window:,} tokens"
    return _finish(out, title, result, "demo")


def _demo_page(args: argparse.Namespace, result: Any) -> None:
    """The demo thread's page (`langgraph-ctx view`), beside its database."""
    from langgraph_ctx_tools.cli.demo import SYSTEM_PROMPT
    from langgraph_ctx_tools.cli.folder_tools import make_tools
    from langgraph_ctx_tools.cli.page import thread_from_db, write_page
    from langgraph_ctx_tools.cli.page_data import page_data

    thread = args.thread or "demo"
    tools = make_tools(result.files["explored"])
    data = thread_from_db(
        str(args.db),
        thread,
        args.archive,
        model=args.model,
        system_prompt=SYSTEM_PROMPT,
        tools=tools,
    )
    data["window"] = args.window  # the demo's model window: the page draws it
    result.files["page"] = str(write_page(page_data(data), args.db.with_name(f"{thread}.html")))


def handle_view(args: argparse.Namespace) -> int:
    """`langgraph-ctx view`; returns the exit code."""
    from langgraph_ctx_tools.cli.page import thread_from_db, thread_from_file, write_page
    from langgraph_ctx_tools.cli.page_data import page_data

    if (args.file is None) == (args.db is None):
        msg = "pass a message file or --db with --thread (one of them)"
        raise InputError(msg)
    if args.db is not None and not args.thread:
        msg = "--db needs --thread ID (inspect lists a database's threads)"
        raise InputError(msg)
    existing_folder(args.html, "--html")
    if args.db is not None:
        data = thread_from_db(
            args.db, args.thread, args.archive, model=args.model, system_prompt=args.system_prompt
        )
        data["window"] = args.window  # given: the page draws the window line
    else:
        window = args.window or DEFAULT_VIEW_WINDOW
        data = thread_from_file(args.file, window=window, reserved=args.reserved, model=args.model)
    page = page_data(data)
    write_page(page, args.html)
    size = args.html.stat().st_size
    say(f"wrote {args.html}: {len(page['calls'])} model calls, {size:,} bytes")
    return 0


def _clip_lines(text: str, lines: int) -> str:
    kept = text.splitlines()
    more = len(kept) - lines
    return "\n".join(kept[:lines] + ([f"… {more} more line(s)"] if more > 0 else []))


def handle_replay(args: argparse.Namespace) -> int:
    """`langgraph-ctx replay`; returns the exit code."""
    from langgraph_ctx_tools.cli.replay_command import replay
    from langgraph_ctx_tools.cli.runs import plot_run

    if args.plot is not None:  # before the replay, not after it
        plot_target(args.plot)
    out = Output()
    total: list[int] = []
    with out.progress(f"replaying {args.file.name}", total) as on_call:
        result = replay(
            args.file,
            **_budget(args),
            **_store(args),
            summarizer=args.summarizer,
            reports=args.report_json,
            on_start=total.append,
            on_call=on_call,
        )
    if args.plot and result.log.calls:
        title = f"{args.file.name}: window {args.window:,}, reserved {args.reserved:,}"
        result.files["plot"] = str(plot_run(args.plot, result.log, title=title))
    title = f"{PROG} replay {args.file.name}: window {args.window:,} tokens"
    return _finish(out, title, result, "replay")


def _finish(out: Output, title: str, result: Any, command: str) -> int:
    if result.log.calls:
        out.table(title, result.rows, result.files)
    for note in result.notes:
        out.note(note)
    if result.log.error:
        return fail(f"{PROG} {command}: {result.log.error}", 1)
    return 0


def handle_frontier(args: argparse.Namespace) -> int:
    """`langgraph-ctx frontier`; returns the exit code."""
    from langgraph_ctx_tools.cli.frontier_run import run_frontier

    return run_frontier(args)


def handle_inspect(args: argparse.Namespace) -> int:
    """`langgraph-ctx inspect`; returns the exit code."""
    from langgraph_ctx_tools.cli.edits import edit_of
    from langgraph_ctx_tools.cli.threads import inspect_thread

    data = inspect_thread(args.db, args.thread, args.archive)
    ledger = data["ledger"]
    summary = ledger.get("summary") or {}
    hint = ledger.get("hint") or {}
    compacted = ledger.get("compacted") or {}
    entities = (ledger.get("entities") or {}).get("values") or {}
    unread = data["full_error"]
    unread = f"; missing what the archive cannot read: {unread}" if unread else ""
    archived = sum(int(e.get("chars", 0)) for e in compacted.values())
    rows = [
        ("live messages", f"{len(data['live'])}"),
        ("full history (archive + live)", f"{len(data['full'])} messages{unread}"),
        ("pruned in the current prompt", f"{len(ledger.get('pruned') or {})}"),
        (
            "compacted in the current prompt",
            f"{len(compacted)} ({archived:,} chars in the archive)",
        ),
        ("window starts at", f"{(ledger.get('window') or {}).get('start_id') or 'the beginning'}"),
        ("running summary", _summary_line(summary) if summary else "none"),
        (
            "compression hint",
            f"yes ({len(hint.get('cleared_ids') or [])} messages cleared)" if hint else "none",
        ),
        ("entities", json.dumps(entities, default=repr)),  # repr: bytes, sets from msgpack
        ("reports in the checkpoints", f"{len(data['reports'])}"),
    ]
    out = Output()
    out.table(f"thread {args.thread} in {args.db}", rows, {})
    for repair in data["ledger_repairs"]:
        out.note(f"damaged ledger, shown without that part: {repair}")
    if summary.get("text"):
        out.text("running summary", summary["text"])
    _edits_grid(out, data["edits"], args)
    if data["reports"]:
        last = data["reports"][-1]
        header = ["edit (report kind)", "attempt", "before", "after", "saved", "messages"]
        body = [
            [
                f"{edit_of(d) or d.kind} ({d.kind})",
                "" if d.attempt is None else str(d.attempt),
                f"{d.tokens_before:,}",
                f"{d.tokens_after:,}",
                f"{d.saved:,}",
                str(len(d.message_ids)),
            ]
            for d in last.decisions
        ]
        caption = f"last report: {last.tokens:,}/{last.limit:,} tokens, ok={last.ok}"
        out.grid(caption, header, body or [["(no decisions)", "", "", "", "", ""]])
    return 0


def _summary_line(summary: dict[str, Any]) -> str:
    """The running summary as `inspect` describes it: size, source, updates, dumps."""
    from langgraph_ctx_tools.cli.runs import SUMMARY_SOURCES

    source = SUMMARY_SOURCES.get(str(summary.get("source")), summary.get("source"))
    older = " (older ones in the archive's dump index)" if summary.get("dump_index") else ""
    return (
        f"{len(summary.get('text') or ''):,} chars, {source}, {summary.get('updates', 0)} "
        f"update(s), covers {summary.get('covered', 0)} messages, "
        f"{len(summary.get('dump_refs') or [])} insurance dump(s) named{older}"
    )


def _edits_grid(out: Output, edits: list[Any], args: argparse.Namespace) -> None:
    """Everything the thread's edits took out of the prompt, and the references to restore."""
    from langgraph_ctx_tools.cli.edits import EDITS, what_happened

    header = ["edit", "what happened", "edits", "messages", "still live", "references"]
    body = [
        [
            f"{EDITS[edit.kind].things} {edit.kind}",
            what_happened(edit.kind, len(edit.refs)),
            str(edit.edits),
            str(len(edit.message_ids)),
            str(edit.live),
            str(len(edit.refs)),
        ]
        for edit in edits
    ]
    caption = "what the thread's edits took out of the prompt (from every report of the thread)"
    out.grid(caption, header, body or [["(no edits)", "", "", "", "", ""]], labels=2)
    lines = []
    for edit in edits:
        for ref in edit.refs[:_REFS_SHOWN]:
            lines.append(f"  {edit.kind:<15} {ref}")
        if len(edit.refs) > _REFS_SHOWN:
            lines.append(f"  {edit.kind:<15} … {len(edit.refs) - _REFS_SHOWN} more")
    if lines:
        restore = f"{PROG} restore REF --thread {args.thread} --archive {args.archive}"
        out.lines(
            f"restore any of these with: {restore}\n(a message id works too; 'still live' "
            "messages are in the thread unchanged, the prompt only showed them less)"
        )
        out.lines("\n".join(lines))


_REFS_SHOWN = 5


def handle_restore(args: argparse.Namespace) -> int:
    """`langgraph-ctx restore`; returns the exit code."""
    from langgraph_ctx_tools.cli.threads import readable_entry, restore_entry

    if args.out is not None:
        existing_folder(args.out, "--out")
    data = restore_entry(args.ref, thread=args.thread, archive_dir=args.archive)
    if args.out is not None:
        args.out.write_bytes(data)
        say(f"wrote {len(data):,} bytes to {args.out}", err=True)
        return 0
    # The entry is a model's or a tool's words: what a terminal would act on is escaped (the
    # JSON record stays JSON); --out writes the bytes as they are.
    text = data.decode("utf-8", "surrogatepass") if args.json else readable_entry(data)
    sys.stdout.write(visible_controls(text, keep_lines=True) + "\n")
    return 0


def handle_compact(args: argparse.Namespace) -> int:
    """`langgraph-ctx compact`; returns the exit code."""
    from langchain_core.messages import messages_to_dict

    from langgraph_ctx_tools.cli.edits import counted, tally
    from langgraph_ctx_tools.cli.threads import compact_transcript

    existing_folder(args.out, "--out")
    messages, report, before = compact_transcript(
        args.file, **_budget(args), archive_dir=args.archive, thread=args.thread
    )
    text = json.dumps(messages_to_dict(messages), indent=1, ensure_ascii=False)
    args.out.write_text(text, encoding="utf-8")
    done = ", ".join(counted(count, word) for word, count in tally(report.decisions))
    done = done or "no edits needed"
    say(
        f"wrote {args.out}: {report.messages_in} messages, {before:,} tokens -> "
        f"{len(messages)} messages, {report.tokens:,} tokens (limit {report.limit:,}); {done}; "
        f"archive {args.archive} (thread {args.thread})"
    )
    return 0


def handle_count(args: argparse.Namespace) -> int:
    """`langgraph-ctx count`; returns the exit code."""
    from langgraph_ctx.tokens._encodings import encoding_name_for_model
    from langgraph_ctx.tokens.exact import get_counter
    from langgraph_ctx_tools.cli.playback import load_tools, load_transcript

    if not _known_model(args.model):
        msg = (
            f"no tokenizer is known for model {shorten(args.model)}; pass an OpenAI model name "
            "(gpt-4o and later: o200k_base; gpt-4, gpt-3.5-turbo: cl100k_base)"
        )
        raise InputError(msg)
    messages = load_transcript(args.file)
    tools = load_tools(args.tools) if args.tools else None
    counter = get_counter(args.model)
    total = counter.count(messages, tools=tools)
    per_type: dict[str, list[int]] = {}
    for message in messages:
        per_type.setdefault(message.type, []).append(counter.count_message(message))
    parts = ", ".join(f"{k} {len(v)} ({sum(v):,})" for k, v in per_type.items())
    tool_part = f"; tool schemas {counter.count_tools(tools):,}" if tools else ""
    sizes = [n for counts in per_type.values() for n in counts]
    largest, median = max(sizes, default=0), int(statistics.median(sizes or [0]))
    say(
        f"{total:,} tokens for {args.model} ({encoding_name_for_model(args.model)}): "
        f"{len(messages)} messages: {parts}{tool_part}; per message median {median:,}, "
        f"largest {largest:,}"
    )
    return 0


_FAMILIES = ("gpt-", "o1", "o3", "o4", "chatgpt-", "text-embedding-", "ft:gpt-")


def _known_model(model: str) -> bool:
    """Whether tiktoken knows the name, or it is of an OpenAI family the counter maps."""
    from tiktoken.model import encoding_name_for_model

    try:
        encoding_name_for_model(model)
    except KeyError:
        return model.lower().startswith(_FAMILIES)
    return True
