"""Old import path, kept so that existing imports keep working.

The code now lives in `langgraph_ctx.archive.history`; the package itself imports it from there.
"""

from __future__ import annotations

from langgraph_ctx.archive.history import (
    ahistory_page,
    history_page,
    plan_history_page,
)

__all__ = [
    "ahistory_page",
    "history_page",
    "plan_history_page",
]
