"""The `langgraph-ctx` commands: argument parsing and printing only.

Commands:

* `demo`: a real agent with real tools over a local tree, kept inside a small window.
* `replay FILE`: a recorded conversation replayed through an agent graph with `ContextMemory`.
* `inspect`: what a stored thread holds (ledger, summary, reports, history lengths).
* `restore`: one archived message, byte for byte.
* `compact FILE`: a transcript built down to a budget, written to a new file.
* `count FILE`: exact tokens of a transcript.

The work happens in `langgraph_ctx.cli.demo` and `langgraph_ctx.cli.replay`. Exit codes:
0 success, 1 a runtime failure (the prompt cannot fit, an archive entry is missing), 2 a usage
error (bad arguments, a missing or malformed file, a transcript with no conversation, an
unknown strategy). Errors are one line on stderr.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from langgraph_ctx.cli.output import Output
from langgraph_ctx.errors import ConfigError, InvalidMessagesError, LangGraphCtxError

PROG = "langgraph-ctx"
HOME = Path(".langgraph_ctx")
"""Default folder of the database and archive, relative to the working directory."""


class _UsageError(Exception):
    """A usage error raised by the parser (exit 2)."""


class _Help(argparse.HelpFormatter):
    """Help that states each option's default (when it has one the help does not already say)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if default is None or default is False or default == argparse.SUPPRESS:
            return text
        if "default" in text or not text:
            return text
        if action.option_strings or action.nargs in (argparse.OPTIONAL, argparse.ZERO_OR_MORE):
            text += " (default: %(default)s)"
        return text


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Help)
        super().__init__(*args, **kwargs)

    # One line instead of argparse's usage block, so every bad input reads the same way.
    def error(self, message: str) -> NoReturn:
        raise _UsageError(f"{self.prog}: {message} (see {self.prog} --help)")


def run(argv: Sequence[str] | None = None) -> int:
    """Parse `argv` and run the command; returns the exit code (see the module docstring)."""
    parser = _build_parser()
    try:
        args = parser.parse_args(argv)
    except _UsageError as exc:
        return _fail(str(exc), 2)
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    if not getattr(args, "handler", None):
        parser.print_help()
        return 2
    from langgraph_ctx.cli.runs import InputError

    try:
        return int(args.handler(args))
    except (InputError, ConfigError, InvalidMessagesError) as exc:  # the input is unusable
        return _fail(f"{PROG} {args.command}: {_first_line(exc)}", 2)
    except LangGraphCtxError as exc:
        return _fail(f"{PROG} {args.command}: {type(exc).__name__}: {_first_line(exc)}", 1)
    except OSError as exc:
        return _fail(f"{PROG} {args.command}: {exc}", 1)
    except KeyboardInterrupt:
        return _fail(f"{PROG} {args.command}: interrupted", 130)


def _fail(message: str, code: int) -> int:
    print(message, file=sys.stderr)
    return code


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


# --- the parser ------------------------------------------------------------------------------


def _whole(text: str, minimum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"expected a number >= {minimum}, got {value}")
    return value


def _positive(text: str) -> int:
    return _whole(text, 1)


def _non_negative(text: str) -> int:
    return _whole(text, 0)


def _build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        description="The context-window manager for LangGraph agents, from the command line.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    demo = sub.add_parser(
        "demo",
        help="a real agent with real tools over a local tree, kept inside a small window",
        description="Run an agent (list_dir, read_file, search_text, recall) over PATH with "
        "ContextMemory in a small window, on a SQLite checkpointer and a directory archive. "
        "Offline and deterministic unless --model is given.",
    )
    demo.add_argument(
        "path", nargs="?", type=Path, help="folder to explore (default: the package's sources)"
    )
    demo.add_argument("--window", type=_positive, default=6_000, help="window in tokens")
    demo.add_argument("--model", help="provider:model for init_chat_model (default: scripted)")
    demo.add_argument("--db", type=Path, default=HOME / "demo.sqlite", help="SQLite file")
    demo.add_argument("--archive", type=Path, default=HOME / "archive", help="archive folder")
    demo.add_argument(
        "--thread", help="thread id (default: 'demo', reset by every run that succeeds)"
    )
    demo.add_argument("--steps", type=_positive, default=12, help="model calls per request")
    demo.set_defaults(handler=_demo)

    replay = sub.add_parser(
        "replay",
        help="replay a recorded conversation through an agent graph with ContextMemory",
        description="Replay FILE (LangChain message JSON, messages_to_dict) through a "
        "create_agent graph with ContextMemory: the recorded AI turns come from a scripted "
        "model and the recorded tool outputs from real tools.",
    )
    replay.add_argument("file", type=Path, help="recorded conversation (JSON)")
    _budget_args(replay, window=16_000)
    replay.add_argument("--summarizer", help="provider:model that writes summaries")
    replay.add_argument("--db", type=Path, default=HOME / "replay.sqlite", help="SQLite file")
    replay.add_argument("--archive", type=Path, default=HOME / "archive", help="archive folder")
    replay.add_argument("--thread", help="thread id (default: replay-<file name>, reset)")
    replay.add_argument("--report-json", type=Path, help="reports file (default: by the db)")
    replay.add_argument("--plot", type=Path, help="draw prompt tokens per call to this PNG")
    replay.set_defaults(handler=_replay)

    inspect = sub.add_parser(
        "inspect",
        help="what a stored thread holds, and what its edits took out of the prompt",
        description="Show a thread a demo or replay stored: live and full history, the ledger, "
        "the running summary, every edit the thread's reports record (pruned, compacted, left "
        "the window, summarized, removed) with the archive references that restore them, and "
        "the last report.",
    )
    inspect.add_argument("--db", type=Path, required=True, help="SQLite checkpoint file")
    inspect.add_argument("--thread", required=True, help="thread id")
    inspect.add_argument("--archive", type=Path, default=HOME / "archive", help="archive folder")
    inspect.set_defaults(handler=_inspect)

    restore = sub.add_parser(
        "restore",
        help="print one archived message, byte for byte",
        description="Print (or write with --out) one archive entry of a thread, verified: a "
        "message, a dump of messages or a text. REF is an lgctx:... reference (inspect lists "
        "them) or a message id.",
    )
    restore.add_argument("ref", metavar="REF_OR_MESSAGE_ID", help="lgctx:... reference or id")
    restore.add_argument("--thread", required=True, help="thread id the entry belongs to")
    restore.add_argument("--archive", type=Path, default=HOME / "archive", help="archive folder")
    restore.add_argument("--out", type=Path, help="write the bytes to this file")
    restore.set_defaults(handler=_restore)

    compact = sub.add_parser(
        "compact",
        help="build a transcript down to a budget",
        description="Build FILE (LangChain message JSON, messages_to_dict) down to --window "
        "tokens with the default strategies (or --strategies), archive what leaves, and write "
        "the prompt to --out (its folder must exist).",
    )
    compact.add_argument("file", type=Path, help="transcript (JSON, messages_to_dict)")
    _budget_args(compact, window=None)
    compact.add_argument(
        "--out", type=Path, required=True, help="file to write (in an existing folder)"
    )
    compact.add_argument("--archive", type=Path, default=HOME / "archive", help="archive folder")
    compact.add_argument("--thread", default="compact", help="archive thread for references")
    compact.set_defaults(handler=_compact)

    count = sub.add_parser(
        "count",
        help="exact tokens of a transcript",
        description="Count FILE's tokens exactly as ChatOpenAI.get_num_tokens_from_messages "
        "does, offline, for an OpenAI model name (its tokenizer), with tool schemas if given.",
    )
    count.add_argument("file", type=Path, help="transcript (JSON, messages_to_dict)")
    count.add_argument("--model", default="gpt-4o", help="model whose tokenizer to use")
    count.add_argument("--tools", type=Path, help="JSON file of tool schemas to include")
    count.set_defaults(handler=_count)
    return parser


def _budget_args(parser: argparse.ArgumentParser, *, window: int | None) -> None:
    if window is None:
        parser.add_argument("--window", type=_positive, required=True, help="window in tokens")
    else:
        parser.add_argument("--window", type=_positive, default=window, help="window in tokens")
    parser.add_argument("--reserved", type=_non_negative, default=0, help="output tokens kept")
    parser.add_argument("--strategies", help="strategy configs: JSON text or a JSON file")


# --- commands ---------------------------------------------------------------------------------


def _demo(args: argparse.Namespace) -> int:
    from langgraph_ctx.cli.demo import run_demo

    out = Output()
    with out.progress("demo agent", None) as on_call:
        result = run_demo(
            root=args.path,
            window=args.window,
            model=args.model,
            db=args.db,
            archive_dir=args.archive,
            thread=args.thread,
            steps=args.steps,
            on_call=on_call,
        )
    if result.answer:
        out.text("the agent's last answer", _clip_lines(result.answer, 14))
    title = f"{PROG} demo: {args.model or 'scripted explorer'}, window {args.window:,} tokens"
    return _finish(out, title, result, "demo")


def _clip_lines(text: str, lines: int) -> str:
    kept = text.splitlines()
    more = len(kept) - lines
    return "\n".join(kept[:lines] + ([f"… {more} more line(s)"] if more > 0 else []))


def _replay(args: argparse.Namespace) -> int:
    from langgraph_ctx.cli.replay import replay
    from langgraph_ctx.cli.runs import plot_run

    if args.plot is not None:  # before the replay, not after it
        from langgraph_ctx.cli.runs import InputError

        try:
            import matplotlib  # noqa: F401
        except ImportError:
            msg = "--plot needs matplotlib: pip install 'langgraph-ctx[cli]'"
            raise InputError(msg) from None
        _existing_folder(args.plot, "--plot")
    out = Output()
    total: list[int] = []
    with out.progress(f"replaying {args.file.name}", total) as on_call:
        result = replay(
            args.file,
            window=args.window,
            reserved=args.reserved,
            strategies=args.strategies,
            summarizer=args.summarizer,
            db=args.db,
            archive_dir=args.archive,
            thread=args.thread,
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
        return _fail(f"{PROG} {command}: {result.log.error}", 1)
    return 0


def _inspect(args: argparse.Namespace) -> int:
    from langgraph_ctx.cli.runs import SUMMARY_SOURCES
    from langgraph_ctx.cli.threads import inspect_thread

    data = inspect_thread(args.db, args.thread, args.archive)
    ledger = data["ledger"]
    summary = ledger.get("summary") or {}
    hint = ledger.get("hint") or {}
    window = ledger.get("window") or {}
    full = data["full"]
    compacted = ledger.get("compacted") or {}
    rows = [
        ("live messages", f"{len(data['live'])}"),
        (
            "full history (archive + live)",
            f"{len(full)} messages"
            + (
                f"; missing what the archive cannot read: {data['full_error']}"
                if data["full_error"]
                else ""
            ),
        ),
        ("pruned in the current prompt", f"{len(ledger.get('pruned') or {})}"),
        (
            "compacted in the current prompt",
            f"{len(compacted)} ({sum(int(e.get('chars', 0)) for e in compacted.values()):,} chars"
            " in the archive)",
        ),
        ("window starts at", f"{window.get('start_id') or 'the beginning'}"),
        (
            "running summary",
            f"{len(summary.get('text') or ''):,} chars, "
            f"{SUMMARY_SOURCES.get(str(summary.get('source')), summary.get('source'))}, "
            f"{summary.get('updates', 0)} update(s), covers {summary.get('covered', 0)}"
            f" messages, {len(summary.get('dump_refs') or [])} insurance dump(s) named"
            + (" (older ones in the archive's dump index)" if summary.get("dump_index") else "")
            if summary
            else "none",
        ),
        (
            "compression hint",
            f"yes ({len(hint.get('cleared_ids') or [])} messages cleared)" if hint else "none",
        ),
        ("entities", json.dumps((ledger.get("entities") or {}).get("values") or {})),
        ("reports in the checkpoints", f"{len(data['reports'])}"),
    ]
    out = Output()
    out.table(f"thread {args.thread} in {args.db}", rows, {})
    if summary.get("text"):
        out.text("running summary", summary["text"])
    _edits_grid(out, data["edits"], args)
    if data["reports"]:
        last = data["reports"][-1]
        header = ["kind", "attempt", "before", "after", "saved", "messages"]
        body = [
            [
                d.kind,
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


def _edits_grid(out: Output, edits: list[Any], args: argparse.Namespace) -> None:
    """Everything the thread's edits took out of the prompt, and the references to restore."""
    from langgraph_ctx.cli.threads import EDIT_KINDS

    header = ["kind", "what", "edits", "messages", "still live", "references"]
    body = [
        [
            edit.kind,
            EDIT_KINDS[edit.kind],
            str(edit.edits),
            str(len(edit.message_ids)),
            str(edit.live),
            str(len(edit.refs)),
        ]
        for edit in edits
    ]
    caption = "what the thread's edits took out of the prompt (from every report of the thread)"
    out.grid(caption, header, body or [["(no edits)", "", "", "", "", ""]])
    lines = []
    for edit in edits:
        for ref in edit.refs[:_REFS_SHOWN]:
            lines.append(f"  {edit.kind:<13} {ref}")
        if len(edit.refs) > _REFS_SHOWN:
            lines.append(f"  {edit.kind:<13} … {len(edit.refs) - _REFS_SHOWN} more")
    if lines:
        restore = f"{PROG} restore REF --thread {args.thread} --archive {args.archive}"
        out.console.print(
            f"restore any of these with: {restore}\n(a message id works too; 'still live' "
            "messages are in the thread unchanged, the prompt only showed them less)",
            soft_wrap=True,
        )
        out.console.print("\n".join(lines), soft_wrap=True, markup=False)


_REFS_SHOWN = 5


def _restore(args: argparse.Namespace) -> int:
    from langgraph_ctx.cli.threads import restore_entry

    if args.out is not None:
        _existing_folder(args.out, "--out")
    data = restore_entry(args.ref, thread=args.thread, archive_dir=args.archive)
    if args.out is not None:
        args.out.write_bytes(data)
        print(f"wrote {len(data):,} bytes to {args.out}", file=sys.stderr)
        return 0
    sys.stdout.write(data.decode("utf-8", "surrogatepass") + "\n")
    return 0


def _existing_folder(path: Path, option: str) -> None:
    from langgraph_ctx.cli.runs import InputError

    folder = path.parent
    if not folder.is_dir():
        msg = f"{option} {path}: folder {folder} does not exist; create it first"
        raise InputError(msg)


def _compact(args: argparse.Namespace) -> int:
    from langchain_core.messages import messages_to_dict

    from langgraph_ctx.cli.threads import compact_transcript

    _existing_folder(args.out, "--out")
    messages, report, before = compact_transcript(
        args.file,
        window=args.window,
        reserved=args.reserved,
        strategies=args.strategies,
        archive_dir=args.archive,
        thread=args.thread,
    )
    text = json.dumps(messages_to_dict(messages), indent=1, ensure_ascii=False)
    args.out.write_text(text, encoding="utf-8")
    kinds: dict[str, int] = {}
    for kind in report.kinds():
        kinds[kind] = kinds.get(kind, 0) + 1
    done = ", ".join(f"{k} {n}" for k, n in kinds.items()) or "no edits needed"
    print(
        f"wrote {args.out}: {report.messages_in} messages, {before:,} tokens -> "
        f"{len(messages)} messages, {report.tokens:,} tokens (limit {report.limit:,}); {done}; "
        f"archive {args.archive} (thread {args.thread})"
    )
    return 0


def _count(args: argparse.Namespace) -> int:
    from langgraph_ctx.cli.replay import load_tools, load_transcript
    from langgraph_ctx.cli.runs import InputError
    from langgraph_ctx.tokens._encodings import encoding_name_for_model
    from langgraph_ctx.tokens.exact import get_counter

    if not _known_model(args.model):
        msg = (
            f"no tokenizer is known for model {args.model!r}; pass an OpenAI model name "
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
    largest = max((n for v in per_type.values() for n in v), default=0)
    median = int(statistics.median([n for v in per_type.values() for n in v] or [0]))
    print(
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
