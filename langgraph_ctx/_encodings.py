"""Old import path of `langgraph_ctx.tokens._encodings`, where the code lives now.

Kept so that existing imports keep working; the package itself imports the new location.
"""

from __future__ import annotations

from langgraph_ctx.tokens._encodings import (
    SUPPORTED_ENCODINGS,
    encoding_name_for_model,
    get_encoding,
    prime_tiktoken_cache,
    verified_rank_bytes,
)
from langgraph_ctx.tokens._encodings import _parse_ranks as _parse_ranks

__all__ = [
    "SUPPORTED_ENCODINGS",
    "encoding_name_for_model",
    "get_encoding",
    "prime_tiktoken_cache",
    "verified_rank_bytes",
]
