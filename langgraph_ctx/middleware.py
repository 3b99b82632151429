"""Old import path, kept so that existing imports keep working.

The code now lives in `langgraph_ctx.graph.middleware`; the package itself imports it from
there.
"""

from __future__ import annotations

from langgraph_ctx.graph.middleware import ContextMiddleware

__all__ = [
    "ContextMiddleware",
]
