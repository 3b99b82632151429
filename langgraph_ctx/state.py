"""Old import path, kept so that existing imports keep working.

The code now lives in `langgraph_ctx.graph.state`; the package itself imports it from there.
"""

from __future__ import annotations

from langgraph_ctx.graph.state import (
    ContextAgentState,
    ContextReactState,
    ContextState,
    Ledger,
)

__all__ = [
    "ContextAgentState",
    "ContextReactState",
    "ContextState",
    "Ledger",
]
