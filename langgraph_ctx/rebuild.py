"""Old import path, kept so that existing imports keep working.

The code now lives in `langgraph_ctx.summaries.rebuild`; the package itself imports it from
there.
"""

from __future__ import annotations

from langgraph_ctx.summaries.rebuild import (
    HINT_NOTE,
    RebuildResult,
    last_prompt_tokens,
    plan_rebuild,
    render_hint,
)

__all__ = [
    "HINT_NOTE",
    "RebuildResult",
    "last_prompt_tokens",
    "plan_rebuild",
    "render_hint",
]
