"""Old import path, kept so that existing imports keep working.

The code now lives in `langgraph_ctx.prompt.view` (with `view_data`, `view_rendering` and
`view_edits`); the package itself imports it from there.
"""

from __future__ import annotations

from langgraph_ctx.prompt.view import PromptView
from langgraph_ctx.prompt.view_data import SummaryPlacement

__all__ = [
    "PromptView",
    "SummaryPlacement",
]
