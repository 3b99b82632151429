"""Old import path of `langgraph_ctx.tokens.provider_count`, where the code lives now.

Kept so that existing imports keep working; the package itself imports the new location.
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
