"""Old import path, kept so that existing imports keep working.

The code now lives in `langgraph_ctx.graph.client`; the package itself imports it from there.
"""

from __future__ import annotations

from langgraph_ctx.graph.client import (
    SdkStoreBackend,
    afull_history,
    full_history,
    state_messages,
)

__all__ = [
    "SdkStoreBackend",
    "afull_history",
    "full_history",
    "state_messages",
]
