"""Old import path, kept so that existing imports keep working.

The code now lives in `langgraph_ctx.archive.recall`; the package itself imports it from there.
"""

from __future__ import annotations

from langgraph_ctx.archive.recall import (
    RECALL_DESCRIPTION,
    RecallArgs,
    entry_text,
    make_recall_tool,
    render_recall,
)

__all__ = [
    "RECALL_DESCRIPTION",
    "RecallArgs",
    "entry_text",
    "make_recall_tool",
    "render_recall",
]
