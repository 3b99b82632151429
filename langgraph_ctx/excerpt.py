"""Old import path, kept so that existing imports keep working.

The code now lives in `langgraph_ctx.prompt.excerpt`; the package itself imports it from there.
"""

from __future__ import annotations

from langgraph_ctx.prompt.excerpt import (
    MAX_LINE_CHARS,
    LaterUse,
    excerpt_lines,
    quoted_lines,
    render_excerpt,
    salient_names,
)

__all__ = [
    "LaterUse",
    "MAX_LINE_CHARS",
    "excerpt_lines",
    "quoted_lines",
    "render_excerpt",
    "salient_names",
]
