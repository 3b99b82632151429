"""Old import path, kept so that existing imports keep working.

The code now lives in `langgraph_ctx.archive._backends`; the package itself imports it from
there.
"""

from __future__ import annotations

from langgraph_ctx.archive._backends import (
    ArchiveBackend,
    DirectoryBackend,
    Namespace,
    StoreBackend,
)

__all__ = [
    "ArchiveBackend",
    "DirectoryBackend",
    "Namespace",
    "StoreBackend",
]
