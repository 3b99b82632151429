"""Old import path, kept so that existing imports keep working.

The code now lives in `langgraph_ctx.summaries.summarizer` (the summary text in
`langgraph_ctx.summaries.transcript` and `langgraph_ctx.prompt.fallback`); the package itself
imports it from there.
"""

from __future__ import annotations

from langgraph_ctx.prompt.fallback import fallback_summary
from langgraph_ctx.prompt.markup import SUMMARY_SECTIONS
from langgraph_ctx.summaries.summarizer import (
    Summarizer,
    SummaryOutcome,
)
from langgraph_ctx.summaries.transcript import (
    SUMMARY_PROMPT,
    redact_messages,
    render_transcript,
)

__all__ = [
    "SUMMARY_PROMPT",
    "SUMMARY_SECTIONS",
    "Summarizer",
    "SummaryOutcome",
    "fallback_summary",
    "redact_messages",
    "render_transcript",
]
