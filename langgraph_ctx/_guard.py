"""Old import path, kept so that existing imports keep working.

The code now lives in `langgraph_ctx.graph._guard`; the package itself imports it from there.
"""

from __future__ import annotations

from langgraph_ctx.graph._guard import (
    NOTHING_LEARNED,
    CallGuard,
    CallRefused,
    GuardedRequest,
    Received,
    effective_window,
    learned,
    tool_name,
)

__all__ = [
    "CallGuard",
    "CallRefused",
    "GuardedRequest",
    "NOTHING_LEARNED",
    "Received",
    "effective_window",
    "learned",
    "tool_name",
]
