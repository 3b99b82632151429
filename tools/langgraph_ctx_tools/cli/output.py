r"""What the commands print: rich tables and panels on stdout, progress and notes on stderr.

On a terminal, tables fit its width. When stdout is not a terminal (a pipe, a file, a test
capture), tables take the width they need, so a setting's name, a row's label and a number are
never cut or wrapped, and piped output reads the same everywhere; only long free text (a
two-column table's value, a panel's text) folds, at `FOLD_WIDTH` columns. Progress is a live
bar on a terminal and lines otherwise (a log file gets a readable trace, not escape codes);
either way every edit of the prompt is shown as it happens.

Everything printed may carry data: a thread id or a summary from a checkpoint, a window id
from a ledger, a file name, a tool's output, a model's words. None of it is trusted, so none of
it reaches the terminal as it is (`inert`, the one rule): a control character (ESC starting an
OSC title or clipboard write or a CSI screen clear, BEL, CR, a C1 code), a bidi override, a
lone surrogate is shown as its `\uXXXX` escape; a URI's password is shown as `***`. `Output`
hands rich only `Text` objects, which rich never reads as markup, so `[link=...]` in data
stays those characters; its console parses no markup and no emoji codes either, so a string
printed on it directly is literal too. Every method of `Output` applies `inert` itself: a
caller cannot forget it.

A file a command writes (`--out`, `--html`, `--json`, `--plot`) is checked before any work
(`existing_folder`, `plot_target`).
"""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.panel import Panel
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Table
from rich.text import Text

from langgraph_ctx.errors import ACTING_CHARACTERS, InputError
from langgraph_ctx_tools import INSTALL_LINE

__all__ = [
    "FOLD_WIDTH",
    "Output",
    "existing_folder",
    "inert",
    "masked",
    "plot_target",
    "say",
    "visible_controls",
]

# Each acting character as its escape; tab and newline apart: a block of text keeps them.
_ESCAPES = {c: f"\\u{c:04x}" for span in ACTING_CHARACTERS for c in span if c not in (9, 10)}
_ESCAPES_AND_LINES = {**_ESCAPES, 9: "\\u0009", 10: "\\u000a"}
_PASSWORD_IN_URI = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]*://[^:/?#@\s]*):[^@/?#\s]*@")
_PASSWORD_PARAM = re.compile(r"(\bpassword=)[^&\s]*", re.IGNORECASE)

FOLD_WIDTH = 110
"""Where long free text folds when stdout is not a terminal: a panel's width, a table's value."""
_UNBOUNDED = 100_000  # a console "width" no table reaches: piped tables take their own width


def masked(text: str | Path) -> str:
    """`text` with the password of every URI in it shown as `***`.

    `postgresql://user:pw@host/db` reads `postgresql://user:***@host/db`, and a
    `password=...` parameter `password=***`: a database named on the command line is shown
    in tables, errors and the page without what opens it.
    """
    shown = _PASSWORD_IN_URI.sub(r"\1:***@", str(text))
    return _PASSWORD_PARAM.sub(r"\1***", shown)


def inert(value: object, *, keep_lines: bool = False) -> str:
    r"""`value` as text safe to print: no control character, no bidi override, no password.

    Each character a terminal could act on (ESC, BEL, CR, backspace, a C1 code), each bidi
    control that would reorder what is shown, each line or paragraph separator and each lone
    surrogate becomes its `\uXXXX` escape, so what was there stays visible and nothing runs;
    passwords in URIs are masked (`masked`). Tab and newline are escaped too, unless
    `keep_lines` (a block of text: a summary, an answer, a cell).
    """
    return visible_controls(masked(str(value)), keep_lines=keep_lines)


def visible_controls(text: str, *, keep_lines: bool = False) -> str:
    r"""`text` with the characters `inert` escapes as `\uXXXX`, and nothing else changed.

    For what must stay as written but for what a terminal would act on: an archived
    message `restore` prints (a URI in it is the message's, not ours to mask). The escapes
    are valid in JSON strings too, so a JSON record stays JSON.
    """
    return text.translate(_ESCAPES if keep_lines else _ESCAPES_AND_LINES)


def _data(value: object, *, style: str = "", keep_lines: bool = True) -> Text:
    """`value` as a rich `Text`: inert, and never read as markup (`[link=...]` stays text)."""
    return Text(inert(value, keep_lines=keep_lines), style=style)


class Output:
    """Tables, text blocks, lines, notes and progress for one command.

    Every string it is given is data (see the module): made `inert` and handed to rich as
    `Text`, so no caller can print markup or a control character by forgetting to escape.
    """

    def __init__(self) -> None:
        # Not a terminal: no width to fit, so nothing is cut (see the module); long free
        # text still folds, at FOLD_WIDTH (`_fold`).
        self.piped = not sys.stdout.isatty()
        width = _UNBOUNDED if self.piped else None
        # No markup, no emoji codes: a string printed on the console directly is literal too.
        self.console = Console(
            file=sys.stdout, width=width, highlight=False, markup=False, emoji=False
        )

    def _fold(self, width: int) -> int | None:
        """The most columns free text takes (None on a terminal: its width decides)."""
        return width if self.piped else None

    def table(self, title: str, rows: list[tuple[str, str]], files: dict[str, str]) -> None:
        """A two-column table, with the files in a second section.

        The labels are never wrapped; a value too long for the line folds.
        """
        table = Table(
            title=_data(title, style="table.title", keep_lines=False),
            show_header=False,
            title_justify="left",
        )
        labels = max((len(key) for key, _ in [*rows, *files.items()]), default=0)
        table.add_column(style="bold", no_wrap=self.piped)
        # Piped, the value column folds where the whole table reaches FOLD_WIDTH (7: borders
        # and padding), never narrower than a file's path needs to read well.
        table.add_column(overflow="fold", max_width=self._fold(max(FOLD_WIDTH - 7 - labels, 40)))
        for key, value in rows:
            table.add_row(_data(key), _data(value))
        if files:
            table.add_section()
            for key, value in files.items():
                table.add_row(_data(key), _data(value))
        self.console.print(table)

    def grid(
        self, title: str, header: list[str], body: list[list[str]], *, labels: int = 1
    ) -> None:
        """A table with a header row; piped, every column takes the width it needs.

        The first `labels` columns are words (a setting, an edit, what it did), aligned
        left; the others are figures, aligned right so their digits line up.
        """
        table = Table(
            title=_data(title, style="table.title", keep_lines=False), title_justify="left"
        )
        for n, name in enumerate(header):
            table.add_column(
                _data(name, keep_lines=False),
                justify="left" if n < labels else "right",
                no_wrap=self.piped,
            )
        for row in body:
            table.add_row(*(_data(cell) for cell in row))
        self.console.print(table)

    def text(self, title: str, body: str) -> None:
        """A titled block of text."""
        title_text = _data(title, keep_lines=False)
        panel = Panel(
            _data(body), title=title_text, title_align="left", width=self._fold(FOLD_WIDTH)
        )
        self.console.print(panel)

    def lines(self, text: str) -> None:
        """Lines of text on stdout, as they are (newlines kept; a terminal wraps long ones)."""
        self.console.print(_data(text), soft_wrap=True)

    def note(self, text: str) -> None:
        """A side remark on stderr."""
        say(f"note: {text}", err=True)

    @contextlib.contextmanager
    def progress(self, label: str, total: list[int] | None) -> Iterator[Callable[[Any], None]]:
        """A callback for each model call: a live bar on a terminal, lines otherwise.

        Every call that edited the prompt gets a line as it happens (what was edited, the
        tokens before and after); plain output also has a line for the first call and every
        10th, so a log shows the run advancing.
        """
        if not sys.stderr.isatty():

            def plain(stat: Any) -> None:
                if stat.decisions or stat.index == 1 or stat.index % 10 == 0:
                    say(f"{label}: call {stat.index}, {_call_line(stat)}", err=True)

            yield plain
            return
        err = Console(stderr=True, highlight=False, markup=False, emoji=False)
        columns = [TextColumn("{task.description}", markup=False), BarColumn()]
        with Progress(*columns, MofNCompleteColumn(), console=err, transient=True) as bar:
            task = bar.add_task(inert(label), total=None)

            def live(stat: Any) -> None:
                if total:
                    bar.update(task, total=total[0])
                if stat.decisions:  # printed above the bar, and kept
                    bar.console.print(_data(f"call {stat.index}: {_call_line(stat)}"))
                description = inert(f"{label}: {_call_line(stat)}")
                bar.update(task, completed=stat.index, description=description)

            yield live


def say(line: str, *, err: bool = False) -> None:
    """Print one line of ours that carries data (a path, a thread id, an error), made inert."""
    print(inert(line), file=sys.stderr if err else sys.stdout, flush=err)


def _call_line(stat: Any) -> str:
    from langgraph_ctx_tools.cli.edits import describe

    edits = [describe(d) for d in stat.decisions]
    return f"{stat.tokens:,}/{stat.limit:,} tokens ({'; '.join(edits) or 'no edits'})"


def existing_folder(path: Path, option: str) -> None:
    """Refuse an output file (`--out`, `--html`, `--json`, `--plot`) whose folder is missing.

    Checked before any work, so a typo costs one line and nothing is written.
    """
    if not path.parent.is_dir():
        msg = f"{option} {path}: folder {path.parent} does not exist; create it first"
        raise InputError(msg)


def plot_target(path: Path) -> None:
    """Refuse `--plot` before the run when matplotlib is missing or the folder is."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise InputError(f"--plot needs matplotlib: {INSTALL_LINE}") from None
    existing_folder(path, "--plot")
