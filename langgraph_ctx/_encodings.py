"""Old import path, kept so that existing imports keep working.

The code now lives in `langgraph_ctx.tokens._encodings`; the package itself imports it from
there.
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
