"""Old import path, kept so that existing imports keep working.

The code now lives in `langgraph_ctx.prompt.markup`, `langgraph_ctx.prompt.sections`,
`langgraph_ctx.prompt.fallback` (the summary text the prompt shows) and
`langgraph_ctx.summaries.transcript` / `langgraph_ctx.summaries.validation` (what the summarizer
model reads and what its answer must be); the package itself imports it from there.
"""

from __future__ import annotations

from langgraph_ctx.prompt.fallback import (
    fallback_summary,
    result_lines,
)
from langgraph_ctx.prompt.markup import (
    MARKUP_TAGS,
    SUMMARY_SECTIONS,
    WRAPPER_TAGS,
    escape_markup,
)
from langgraph_ctx.prompt.sections import _parse as _parse
from langgraph_ctx.summaries.transcript import (
    SUMMARY_PROMPT,
    redact_messages,
    render_transcript,
)

__all__ = [
    "MARKUP_TAGS",
    "SUMMARY_PROMPT",
    "SUMMARY_SECTIONS",
    "WRAPPER_TAGS",
    "escape_markup",
    "fallback_summary",
    "redact_messages",
    "render_transcript",
    "result_lines",
]
