"""Old import path, kept so that existing imports keep working.

The code now lives in `langgraph_ctx.tokens.provider_count`; the package itself imports it from
there.
"""

from __future__ import annotations

from langgraph_ctx.tokens.provider_count import (
    CountApi,
    ProviderCounter,
    count_api_for,
)

__all__ = [
    "CountApi",
    "ProviderCounter",
    "count_api_for",
]
