"""The pipeline: what the graph holds in, the prompt the model receives out (pure; I/O as effects).

- `manager`: `ContextManager`, the pipeline (`build` / `abuild` / `plan`).
- `result`: `BuildResult`, what a build returns.
- `steps`: the steps of a build around its strategies; `options`: the manager's options.
- `summarized_removal`: which summarized messages leave the live history (`remove_summarized`).
"""

from __future__ import annotations

from langgraph_ctx.pipeline.manager import ContextManager
from langgraph_ctx.pipeline.result import BuildResult

__all__ = ["BuildResult", "ContextManager"]
