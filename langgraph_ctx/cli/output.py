"""What the commands print: rich tables and panels on stdout, progress and notes on stderr.

Tables are 110 columns wide when stdout is not a terminal, so piped output and test captures
read the same everywhere. Progress is a live bar on a terminal and lines otherwise (a log file
gets a readable trace, not escape codes); either way every edit of the prompt is shown as it
happens.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Table


class Output:
    """Tables, text blocks, notes and progress for one command."""

    def __init__(self) -> None:
        width = None if sys.stdout.isatty() else 110
        self.console = Console(file=sys.stdout, width=width, highlight=False)

    def table(self, title: str, rows: list[tuple[str, str]], files: dict[str, str]) -> None:
        """A two-column table, with the files in a second section."""
        table = Table(title=title, show_header=False, title_justify="left")
        table.add_column(style="bold")
        table.add_column(overflow="fold")
        for key, value in rows:
            table.add_row(key, value)
        if files:
            table.add_section()
            for key, value in files.items():
                table.add_row(key, value)
        self.console.print(table)

    def grid(self, title: str, header: list[str], body: list[list[str]]) -> None:
        """A table with a header row."""
        table = Table(title=title, title_justify="left")
        for name in header:
            table.add_column(name, justify="left" if name in ("kind", "setting") else "right")
        for row in body:
            table.add_row(*row)
        self.console.print(table)

    def text(self, title: str, body: str) -> None:
        """A titled block of text."""
        self.console.print(Panel(escape(body), title=title, title_align="left"))

    def note(self, text: str) -> None:
        """A side remark on stderr."""
        print(f"note: {text}", file=sys.stderr)

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
                    print(f"{label}: call {stat.index}, {_call_line(stat)}", file=sys.stderr)

            yield plain
            return
        err = Console(stderr=True, highlight=False)
        columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn()]
        with Progress(*columns, console=err, transient=True) as bar:
            task = bar.add_task(label, total=None)

            def live(stat: Any) -> None:
                if total:
                    bar.update(task, total=total[0])
                if stat.decisions:  # printed above the bar, and kept
                    bar.console.print(escape(f"call {stat.index}: {_call_line(stat)}"))
                bar.update(task, completed=stat.index, description=f"{label}: {_call_line(stat)}")

            yield live


def _call_line(stat: Any) -> str:
    from langgraph_ctx.cli.edits import describe

    edits = [describe(d) for d in stat.decisions]
    return f"{stat.tokens:,}/{stat.limit:,} tokens ({'; '.join(edits) or 'no edits'})"
