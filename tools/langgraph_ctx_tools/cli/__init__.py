"""The tools for people: the `langgraph-ctx` command line and the machinery behind it.

Part of the tools distribution (`langgraph-ctx-tools`, which brings rich and matplotlib); the
runtime `langgraph_ctx` never imports this package, so a deployment installs none of it.

Modules:

* `commands`: argument parsing; `handlers`: the command handlers (`demo`, `replay`,
  `inspect`, `restore`, `compact`, `count`, `frontier`, `view`); `output`: what they print,
  and the check of the folder of each file they write.
* `replay_command`: the `replay` command, which drives a real agent over a recorded
  conversation (SQLite checkpointer, whole runs);
  `playback`: read the recording and play it back (scripted model, replay tools);
  `threads`: inspect a thread, restore an entry, compact a transcript.
* `recorder`: record a run call by call; `runs`: the record, the check that nothing was lost,
  the reports and plots.
* `explorer`: the offline chat models (the demo's scripted explorer and their shared base).
* `page`: what the page of `langgraph-ctx view` reads of a thread; `page_data`: the page's data;
  `page.html`: its template.
* `demo`: the demo agent; `folder_tools`: its read-only tools over a local folder.
* `frontier_run`: the `frontier` command; `frontier_plot`: its plot; `sources`: the threads
  it reads (files, checkpoint databases); `inputs`:
  reading a file a person hands over, within bounds. The settings compared and the measures
  (effective cost, next-step recall) live one layer down, in `langgraph_ctx_tools.replay`,
  where the benchmarks use them too.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from langgraph_ctx_tools import INSTALL_LINE

__all__ = ["main"]

INSTALL_HINT = f"langgraph-ctx: the command line needs rich: {INSTALL_LINE}"
"""The one line printed when a dependency of the command line is missing (an install of the
tools without their dependencies, `pip install --no-deps`)."""
_EXTRA_MODULES = frozenset({"rich"})
"""Top-level modules of the tools' dependencies the commands import up front (matplotlib is
imported only by `--plot`, which says itself what to install)."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `langgraph-ctx` command line.

    Args:
        argv: The arguments after the program name (default: `sys.argv[1:]`).

    Returns:
        The exit code: 0 success, 1 a runtime failure, 2 a usage error or a missing
        dependency (rich), 130 interrupted.
    """
    try:
        from langgraph_ctx_tools.cli.commands import run
    except ImportError as exc:
        if (exc.name or "").partition(".")[0] not in _EXTRA_MODULES:
            raise  # a broken install of the tools themselves, not a missing dependency
        print(INSTALL_HINT, file=sys.stderr)
        return 2
    return run(argv)
