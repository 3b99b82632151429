"""Old import path of `langgraph_ctx.tokens._media`, where the code lives now.

Kept so that existing imports keep working; the package itself imports the new location.
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
