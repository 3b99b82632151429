"""Old import path, kept so that existing imports keep working.

The code now lives in `langgraph_ctx.tokens._media`; the package itself imports it from there.
"""

from __future__ import annotations

from langgraph_ctx.tokens._media import (
    anthropic_image_tokens,
    audio_tokens,
    document_tokens,
    google_image_tokens,
    image_size,
    image_tokens,
    is_media,
    media_tokens,
    openai_image_tokens,
    split_data_url,
)

__all__ = [
    "anthropic_image_tokens",
    "audio_tokens",
    "document_tokens",
    "google_image_tokens",
    "image_size",
    "image_tokens",
    "is_media",
    "media_tokens",
    "openai_image_tokens",
    "split_data_url",
]
