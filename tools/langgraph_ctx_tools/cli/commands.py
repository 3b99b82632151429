"""The `langgraph-ctx` commands: argument parsing and printing only.

Commands:

* `demo`: a real agent with real tools over a local tree, kept inside a small window.
* `replay FILE`: a recorded conversation replayed through an agent graph with `ContextMemory`.
* `inspect`: what a stored thread holds (ledger, summary, reports, history lengths).
* `restore`: one archived message, byte for byte.
* `compact FILE`: a transcript built down to a budget, written to a new file.
* `count FILE`: exact tokens of a transcript.
* `view --db --thread --html OUT` (or `view FILE --html OUT`): a thread as one HTML page, each
  model call's prompt by part against the budget, its edits, the originals from the archive.
* `frontier PATH... | --db`: recorded threads replayed under the defaults and their neighbouring
  settings: effective cost, next-step recall, prompts over the budget; a recommended setting.

The handlers are `langgraph_ctx_tools.cli.handlers`; the work happens in
`langgraph_ctx_tools.cli.demo` and `langgraph_ctx_tools.cli.replay_command`. Exit codes:
0 success, 1 a runtime failure (the prompt cannot fit, an archive entry is missing), 2 a usage
error (bad arguments, a missing or malformed file, database or archive entry, a transcript with
no conversation, an unknown strategy). Errors are one line on stderr, shown like everything the
commands print (`langgraph_ctx_tools.cli.output.inert`: no control character, no password).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from langgraph_ctx.errors import (
    ArchiveCorruptError,
    ConfigError,
    InputError,
    InvalidMessagesError,
    LangGraphCtxError,
    UntrustedCheckpointError,
    reason_of,
    shorten,
)
from langgraph_ctx_tools.cli.handlers import (
    HOME,
    PROG,
    fail,
    handle_compact,
    handle_count,
    handle_demo,
    handle_frontier,
    handle_inspect,
    handle_replay,
    handle_restore,
    handle_view,
)
from langgraph_ctx_tools.cli.inputs import DEFAULT_MAX_INPUT_MB, input_limit


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
        return fail(str(exc), 2)
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    if not getattr(args, "handler", None):
        parser.print_help()
        return 2
    # A corrupt archive entry is a handed folder that cannot be used, like a bad file.
    unusable = (
        InputError,
        ConfigError,
        InvalidMessagesError,
        UntrustedCheckpointError,
        ArchiveCorruptError,
    )
    try:
        with input_limit(getattr(args, "max_input_mb", None)):
            return int(args.handler(args))
    except unusable as exc:  # the input is unusable
        return fail(f"{PROG} {args.command}: {reason_of(exc)}", 2)
    except LangGraphCtxError as exc:
        return fail(f"{PROG} {args.command}: {type(exc).__name__}: {reason_of(exc)}", 1)
    except OSError as exc:
        return fail(f"{PROG} {args.command}: {exc}", 1)
    except KeyboardInterrupt:
        return fail(f"{PROG} {args.command}: interrupted", 130)
    except MemoryError:  # the bounds in `inputs` make this rare; still one line, not a trace
        return fail(f"{PROG} {args.command}: out of memory; pass smaller inputs", 1)


# --- the parser ------------------------------------------------------------------------------


def _number(text: str, kind: type[Any], noun: str, ok: Callable[[Any], bool], expected: str) -> Any:
    """`text` read as `kind` (`int` or `float`); a value not `ok` is refused as not `expected`."""
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {noun}, got {shorten(text)}") from None
    if not ok(value):
        raise argparse.ArgumentTypeError(f"expected {expected}, got {value}")
    return value


def _positive(text: str) -> int:
    return int(_number(text, int, "a whole number", lambda v: v >= 1, "a number >= 1"))


def _non_negative(text: str) -> int:
    return int(_number(text, int, "a whole number", lambda v: v >= 0, "a number >= 0"))


def _price(text: str) -> float:
    share = "a share between 0 and 1"
    return float(_number(text, float, "a number", lambda v: 0 <= v <= 1, share))


def _ratio(text: str) -> float:
    ratio = "a ratio over 0 such as 1.2"
    return float(_number(text, float, "a number", lambda v: 0 < v < float("inf"), ratio))


# Each command's line in the list of commands (help) and the text atop its own --help
# (description), kept apart from its options so that the parser below reads as options only.
_ABOUT: dict[str, tuple[str, str]] = {
    "demo": (
        "a real agent with real tools over a local tree, kept inside a small window",
        "Run an agent (list_dir, read_file, search_text, recall) over PATH with "
        "ContextMemory in a small window, on a SQLite checkpointer and a directory archive. "
        "Offline and deterministic unless --model is given.",
    ),
    "replay": (
        "replay a recorded conversation through an agent graph with ContextMemory",
        "Replay FILE (LangChain message JSON, messages_to_dict) through a "
        "create_agent graph with ContextMemory: the recorded AI turns come from a scripted "
        "model and the recorded tool outputs from real tools.",
    ),
    "inspect": (
        "what a stored thread holds, and what its edits took out of the prompt",
        "Show a thread a demo or replay stored: live and full history, the ledger, "
        "the running summary, every edit the thread's reports record (pruned, compacted, left "
        "the window, summarized, removed) with the archive references that restore them, and "
        "the last report.",
    ),
    "restore": (
        "print one archived message, byte for byte",
        "Print (or write with --out, exactly) one archive entry of a thread, "
        "verified: a message, a dump of messages or a text, as text to read (--json: the "
        "exact record). REF is an lgctx:... reference (inspect lists "
        "them) or a message id.",
    ),
    "compact": (
        "build a transcript down to a budget",
        "Build FILE (LangChain message JSON, messages_to_dict) down to --window "
        "tokens with the default strategies (or --strategies), archive what leaves, and write "
        "the prompt to --out (its folder must exist).",
    ),
    "count": (
        "exact tokens of a transcript",
        "Count FILE's tokens exactly as ChatOpenAI.get_num_tokens_from_messages "
        "does, offline, for an OpenAI model name (its tokenizer), with tool schemas if given.",
    ),
    "frontier": (
        "what context management costs and hides on your own threads, per setting",
        "Replay recorded threads (message JSON files, folders of them, or the "
        "threads of a checkpoint database) through the pipeline under the defaults, their "
        "neighbouring settings and any --setting, and what a team would pick instead (tool-safe "
        "trim_messages, LangChain's SummarizationMiddleware, deepagents), and print per row: "
        "effective cost and its ratio to the defaults, next-step recall, prompts over the "
        "budget, invalid prompts, share restorable. No model is called unless --summarizer "
        "names one (then every row that summarizes gets it); else every row that summarizes, "
        "ours and the alternatives, gets the same stand-in summarizer (--summaries). The "
        "last line recommends a change only when it buys something over the defaults (+1 point "
        "of recall within --max-cost times their cost, or 2% less cost at no less recall; of "
        "those the best recall), else keeps the defaults and names the runner-up, and says how "
        "to apply it.",
    ),
    "view": (
        "a thread as one HTML page: each model call's prompt by part, its edits, originals",
        "Write one self-contained HTML page (no network) of a stored thread (--db "
        "and --thread), or of a message file replayed through the default pipeline: a bar per "
        "model call, its prompt by part (system, summary, quoted lines, excerpts, shortened "
        "turns, whole messages, tool schemas) against the budget, the call's edits, each "
        "part's text and the original restored from the archive, and a search over the thread.",
    ),
}


def _build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        description="The context-window manager for LangGraph agents, from the command line.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    demo = _command(sub, "demo", handle_demo)
    demo.add_argument(
        "path", nargs="?", type=Path, help="folder to explore (default: the package's sources)"
    )
    demo.add_argument("--window", type=_positive, default=6_000, help="window in tokens")
    demo.add_argument("--model", help="provider:model for init_chat_model (default: scripted)")
    demo.add_argument("--db", type=Path, default=HOME / "demo.sqlite", help="SQLite file")
    _archive_arg(demo)
    demo.add_argument(
        "--thread", help="thread id (default: 'demo', reset by every run that succeeds)"
    )
    demo.add_argument("--steps", type=_positive, default=12, help="model calls per request")

    replay = _command(sub, "replay", handle_replay)
    replay.add_argument("file", type=Path, help="recorded conversation (JSON)")
    _budget_args(replay, window=16_000)
    replay.add_argument("--summarizer", help="provider:model that writes summaries")
    replay.add_argument("--db", type=Path, default=HOME / "replay.sqlite", help="SQLite file")
    _archive_arg(replay)
    replay.add_argument("--thread", help="thread id (default: replay-<file name>, reset)")
    replay.add_argument("--report-json", type=Path, help="reports file (default: by the db)")
    replay.add_argument("--plot", type=Path, help="draw prompt tokens per call to this PNG")
    _input_arg(replay)

    inspect = _command(sub, "inspect", handle_inspect)
    inspect.add_argument(
        "--db", required=True, help="checkpoint database: a SQLite file or postgresql:// URI"
    )
    inspect.add_argument("--thread", required=True, help="thread id")
    _archive_arg(inspect, f"archive folder {_OWN_STORE}")
    _input_arg(inspect)  # the cap on one stored value of --db

    restore = _command(sub, "restore", handle_restore)
    restore.add_argument("ref", metavar="REF_OR_MESSAGE_ID", help="lgctx:... reference or id")
    restore.add_argument("--thread", required=True, help="thread id the entry belongs to")
    _archive_arg(restore)
    restore.add_argument("--out", type=Path, help="write the bytes to this file")
    restore.add_argument(
        "--json", action="store_true", help="print the exact record (JSON) instead of the text"
    )

    compact = _command(sub, "compact", handle_compact)
    compact.add_argument("file", type=Path, help="transcript (JSON, messages_to_dict)")
    _budget_args(compact, window=None)
    compact.add_argument(
        "--out", type=Path, required=True, help="file to write (in an existing folder)"
    )
    _archive_arg(compact)
    compact.add_argument("--thread", default="compact", help="archive thread for references")
    _input_arg(compact)

    count = _command(sub, "count", handle_count)
    count.add_argument("file", type=Path, help="transcript (JSON, messages_to_dict)")
    count.add_argument("--model", default="gpt-4o", help="model whose tokenizer to use")
    count.add_argument("--tools", type=Path, help="JSON file of tool schemas to include")
    _input_arg(count)
    _frontier_parser(sub)
    _view_parser(sub)
    return parser


def _frontier_parser(sub: Any) -> None:
    frontier = _command(sub, "frontier", handle_frontier)
    frontier.add_argument(
        "inputs", nargs="*", type=Path, metavar="PATH",
        help="message JSON files (.json or .json.gz) or folders of them",
    )  # fmt: skip
    frontier.add_argument("--db", help="checkpoint database: a SQLite file or postgresql:// URI")
    frontier.add_argument(
        "--thread", action="append", help="a thread of --db (repeatable; default: every thread)"
    )
    _archive_arg(frontier, f"archive folder of --db's threads {_OWN_STORE}")
    frontier.add_argument("--window", type=_positive, help="window in tokens")
    frontier.add_argument("--reserved", type=_non_negative, default=0, help="output tokens kept")
    frontier.add_argument(
        "--model", help="provider:model: its profile gives the window, its tokenizer counts"
    )
    frontier.add_argument(
        "--setting", action="append", type=Path, metavar="FILE.json",
        help="a setting of your own: strategy configs (repeatable)",
    )  # fmt: skip
    frontier.add_argument(
        "--no-neighbours", action="store_true", help="only the defaults and the --setting files"
    )
    frontier.add_argument(
        "--no-alternatives", action="store_true",
        help="leave out the rows of trim_messages, SummarizationMiddleware and deepagents",
    )  # fmt: skip
    frontier.add_argument(
        "--cache-price", type=_price, default=0.1, help="a cached token's price, share of one"
    )
    frontier.add_argument(
        "--max-cost", type=_ratio, default=1.0, metavar="RATIO",
        help="the most the recommended setting may cost, times the defaults' cost",
    )  # fmt: skip
    frontier.add_argument("--summarizer", help="provider:model that writes real summaries")
    frontier.add_argument(
        "--summaries", choices=["same", "shape"],
        help="without --summarizer, every row's summarizer: same = the deterministic summary "
        "(default), shape = the conversation's shape only, no line of any tool output",
    )  # fmt: skip
    frontier.add_argument("--system-prompt", help="system prompt for threads without one")
    frontier.add_argument("--json", type=Path, metavar="OUT", help="write the rows as JSON")
    frontier.add_argument("--plot", type=Path, metavar="PNG", help="draw cost against recall")
    _input_arg(frontier)


def _view_parser(sub: Any) -> None:
    view = _command(sub, "view", handle_view)
    view.add_argument("file", nargs="?", type=Path, help="a message file (instead of --db)")
    view.add_argument("--db", help="checkpoint database: a SQLite file or postgresql:// URI")
    view.add_argument("--thread", help="thread id of --db")
    _archive_arg(view, f"archive folder of --db's thread {_OWN_STORE}")
    view.add_argument("--html", type=Path, required=True, metavar="OUT.html", help="page to write")
    view.add_argument("--model", help="provider:model whose tokenizer counts (default: gpt-4o)")
    view.add_argument(
        "--system-prompt", help="the agent's system prompt, when the thread's state lacks it"
    )
    view.add_argument(
        "--window", type=_positive,
        help="the model's window: FILE is replayed in it (default 32,000); with --db, drawn",
    )  # fmt: skip
    view.add_argument(
        "--reserved", type=_non_negative, default=0, help="output tokens kept in FILE's replay"
    )
    _input_arg(view)


def _command(
    sub: Any, name: str, handler: Callable[[argparse.Namespace], int]
) -> argparse.ArgumentParser:
    """The parser of command `name`, described by `_ABOUT`, whose arguments `handler` runs."""
    summary, description = _ABOUT[name]
    parser: argparse.ArgumentParser = sub.add_parser(name, help=summary, description=description)
    parser.set_defaults(handler=handler)
    return parser


_OWN_STORE = "(entries not there: the database's own store)"


def _archive_arg(parser: argparse.ArgumentParser, text: str = "archive folder") -> None:
    """`--archive`: the archive folder, by default the one beside the default databases."""
    parser.add_argument("--archive", type=Path, default=HOME / "archive", help=text)


def _input_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--max-input-mb", type=_positive, default=DEFAULT_MAX_INPUT_MB, metavar="MB",
        help="most megabytes one input file may hold, after decompression",
    )  # fmt: skip


def _budget_args(parser: argparse.ArgumentParser, *, window: int | None) -> None:
    required = window is None  # compact: no default window
    parser.add_argument(
        "--window", type=_positive, required=required, default=window, help="window in tokens"
    )
    parser.add_argument("--reserved", type=_non_negative, default=0, help="output tokens kept")
    parser.add_argument("--strategies", help="strategy configs: JSON text or a JSON file")
