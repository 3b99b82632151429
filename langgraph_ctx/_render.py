"""Old import path, kept so that existing imports keep working.

The code now lives in `langgraph_ctx.prompt.render` (`summary_text_of`:
`langgraph_ctx.messages.base`); the package itself imports it from there.
"""

from __future__ import annotations

from langgraph_ctx.messages.base import summary_text_of
from langgraph_ctx.prompt.render import (
    RECALL_CALL,
    RenderCache,
    compacted_text,
    pruned_text,
    recall_note,
    references_recall,
    replace_text,
    shortened_turn,
    still_describes,
    summary_body,
    summary_message_for,
    task_dropped_message,
    tool_of,
    without_recall_calls,
)

__all__ = [
    "RECALL_CALL",
    "RenderCache",
    "compacted_text",
    "pruned_text",
    "recall_note",
    "references_recall",
    "replace_text",
    "shortened_turn",
    "still_describes",
    "summary_body",
    "summary_message_for",
    "summary_text_of",
    "task_dropped_message",
    "tool_of",
    "without_recall_calls",
]
