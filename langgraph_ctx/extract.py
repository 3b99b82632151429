"""Old import path, kept so that existing imports keep working.

The code now lives in `langgraph_ctx.summaries.extract`; the package itself imports it from
there.
"""

from __future__ import annotations

from langgraph_ctx.summaries.extract import (
    EXTRACTION_PROMPT,
    EntityExtractor,
)

__all__ = [
    "EXTRACTION_PROMPT",
    "EntityExtractor",
]
