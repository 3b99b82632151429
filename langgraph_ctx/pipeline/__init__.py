"""`ContextManager`: turns what the graph holds into what the model receives.

Pure and deterministic: same messages and ledger in, same prompt out, byte for byte. The only
I/O (memory search, archive writes, summarizer and extractor calls) goes through effects, so
`build` and `abuild` share one body (`plan`).

A build assembles a `PromptView` (base system prompt, tool schemas, retrieved memory, the
history window and the ledger of earlier edits), runs the strategies of its list on it in
order (see `langgraph_ctx.strategies` for the default list and what each does), and renders
the prompt. A prompt still over the limit raises `ContextWindowExceededError` with the report.

- `manager`: `ContextManager`, the pipeline (`build` / `abuild` / `plan`).
- `result`: `BuildResult`, what a build returns.
- `steps`: the steps of a build around its strategies; `options`: the manager's options.
"""

from __future__ import annotations

from langgraph_ctx.pipeline.manager import ContextManager
from langgraph_ctx.pipeline.result import BuildResult

__all__ = ["BuildResult", "ContextManager"]
