"""The tools a person runs over langgraph-ctx, apart from the runtime a deployment installs.

Distribution `langgraph-ctx-tools` (tools/pyproject.toml in the repository):

* `langgraph_ctx_tools.cli`: the `langgraph-ctx` command line (`python -m
  langgraph_ctx_tools.cli`), its demo agent and the page of `langgraph-ctx view`.
* `langgraph_ctx_tools.replay`: replaying recorded threads and measuring them (the engine, the
  measures, the alternatives the frontier compares), shared by the command line and the
  benchmarks.

It builds on the public and internal modules of `langgraph_ctx` (the same release); the runtime
never imports this package.
"""

from __future__ import annotations

__all__ = ["INSTALL_LINE"]

INSTALL_LINE = (
    "pip install -e . -e tools in a clone, or pip install the two wheels a clone builds "
    "(README: Install)"
)
"""How to install the tools with the runtime today, for a message that needs them: neither
distribution is on a package index yet."""
