"""LangChain's convention for a model call internal to a middleware, as the package's calls use it.

Every model call the package makes for itself (the summarizer's, the entity extractor's) is
internal, never the agent's own answer, so it is marked as LangChain marks internal calls:
the `nostream` tag keeps it out of LangGraph's `messages` stream (and the server's
`messages-tuple`), `internal_call_metadata()` out of the v3 event stream's `run.messages` (with
`InternalCallTransformer` declared on the middleware, `internal_call_transformers`), `lc_source`
names it, and a chat model is called with streaming disabled (`internal_model`), so
`astream_events` v2 carries no token of it either. The call guard (`graph/guard.py`) reads the
same metadata to tell another middleware's internal call from the agent's.
"""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel

__all__ = [
    "INTERNAL_TAG",
    "internal_call_config",
    "internal_call_transformers",
    "internal_metadata",
    "internal_model",
]

INTERNAL_TAG = "nostream"
"""LangGraph's tag for calls whose tokens users should not see streamed (`TAG_NOSTREAM`)."""


def internal_call_config(config: Any, source: str) -> dict[str, Any]:
    """`config` marked as an internal call: the `nostream` tag, `lc_source`, internal metadata.

    Args:
        config: The caller's `RunnableConfig` (tags, metadata, run name), or None.
        source: The `lc_source` value, e.g. `"summarization"`.

    Returns:
        A new config; the caller's tags and metadata are kept.
    """
    out = dict(config or {})
    tags = list(out.get("tags") or [])
    out["tags"] = tags if INTERNAL_TAG in tags else [*tags, INTERNAL_TAG]
    out["metadata"] = {
        **dict(out.get("metadata") or {}),
        "lc_source": source,
        **internal_metadata(),
    }
    return out


def internal_metadata() -> dict[str, Any]:
    """LangChain's metadata marking an internal call (`internal_call_metadata()`), or {}."""
    try:
        from langchain.agents.middleware.internal_call_transformer import (
            internal_call_metadata,
        )
    except ImportError:  # an older langchain without the convention: the tag still works
        return {}
    return internal_call_metadata()


def internal_call_transformers() -> tuple[Any, ...]:
    """The middleware's stream transformers that hide internal calls (none in older langchain)."""
    try:
        from langchain.agents.middleware.internal_call_transformer import (
            InternalCallTransformer,
        )
    except ImportError:  # an older langchain: the `nostream` tag still filters `messages`
        return ()
    return (InternalCallTransformer,)


def internal_model(model: Any) -> Any:
    """`model` as an internal call sends it: a chat model that could stream, with streaming off.

    `disable_streaming=True` is langchain-core's own opt-out, honoured before any provider code
    runs; the copy shares the client. Any other runnable is returned as it is.
    """
    if isinstance(model, BaseChatModel) and model.disable_streaming is not True:
        return model.model_copy(update={"disable_streaming": True})
    return model
