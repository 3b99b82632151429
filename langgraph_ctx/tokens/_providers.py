"""Which counter a chat model gets: its provider family, read from the model itself.

The family comes from LangChain's own tracing parameters (`model._get_ls_params()`:
`ls_provider`, `ls_model_name`), then the model name, then the model's class name. An OpenAI
tokenizer is used only for an OpenAI model name served by OpenAI (or Azure OpenAI, or an
OpenAI-compatible endpoint serving an OpenAI model name); everything else gets an
`ApproximateCounter` with its provider's characters per token and media formulas, calibrated
from real usage by the pipeline. Never a silent OpenAI tokenizer for a model that is not OpenAI.

`offline_counter` is that choice. It sits below `provider_count`, whose counters fall back to
it; `langgraph_ctx.tokens.models` adds the provider's count API and the windows on top.
"""

from __future__ import annotations

from typing import Any

from langgraph_ctx.tokens.approximate import ApproximateCounter
from langgraph_ctx.tokens.counter import TokenCounter
from langgraph_ctx.tokens.exact import TiktokenCounter

_OPENAI_PREFIXES = ("gpt-", "o1", "o3", "o4", "chatgpt-", "text-davinci", "davinci", "babbage")

_PROVIDER_FAMILIES = {
    "openai": "openai",
    "azure": "openai",
    "azure_openai": "openai",
    "anthropic": "anthropic",
    "google_anthropic_vertex": "anthropic",
    "google_genai": "google",
    "google_vertexai": "google",
    "google": "google",
    "vertexai": "google",
}


def model_name_of(model: Any) -> str:
    """The model name a chat model reports (`ls_model_name`, `model_name`, `model`), or ''."""
    params = ls_params(model)
    for value in (
        params.get("ls_model_name"),
        getattr(model, "model_name", None),
        getattr(model, "model", None),
    ):
        if isinstance(value, str) and value:
            return value
    return ""


def ls_params(model: Any) -> dict[str, Any]:
    """The LangSmith parameters a chat model reports (`ls_provider`, `ls_model_name`), or {}."""
    get = getattr(model, "_get_ls_params", None)
    if not callable(get):
        return {}
    try:
        params = get()
    except Exception:  # a model whose tracing parameters need a call-time argument
        return {}
    return dict(params) if isinstance(params, dict) else {}


def is_openai_model_name(name: str) -> bool:
    """Whether `name` is an OpenAI model name (tiktoken knows it, or an OpenAI prefix)."""
    from tiktoken.model import encoding_name_for_model

    lowered = name.lower().rsplit("/", 1)[-1]
    try:
        encoding_name_for_model(lowered)
    except KeyError:
        return lowered.startswith(_OPENAI_PREFIXES)
    return True


def provider_family(model: Any) -> str:
    """`"openai"`, `"anthropic"`, `"google"` or `"unknown"` for a chat model.

    An OpenAI-compatible client (`ChatOpenAI(base_url=...)`) serving a model that is not an
    OpenAI model name is `"unknown"`, or the family its name shows (`claude-*`, `gemini-*`).
    """
    provider = str(ls_params(model).get("ls_provider") or "").lower()
    name = model_name_of(model).lower()
    family = _PROVIDER_FAMILIES.get(provider, "unknown")
    if family == "openai" and not is_openai_model_name(name):
        family = "unknown"  # an OpenAI-compatible server with another model
    if family == "unknown":
        short = name.rsplit("/", 1)[-1]
        if "claude" in short:
            return "anthropic"
        if short.startswith(("gemini", "gemma", "models/gemini")):
            return "google"
        if (
            provider in ("openai", "azure", "azure_openai", "")
            and name
            and is_openai_model_name(name)
        ):
            return "openai"
        kind = type(model).__name__.lower()
        if not name and "anthropic" in kind:
            return "anthropic"
        if not name and ("google" in kind or "gemini" in kind):
            return "google"
    return family


def _family_of_name(name: str) -> str:
    lowered = name.lower()
    if "claude" in lowered:
        return "anthropic"
    if "gemini" in lowered or "gemma" in lowered:
        return "google"
    return "unknown"


def offline_counter(model: Any = None) -> TokenCounter:
    """The counter `model` gets without its provider's count API (see `counter_for_model`).

    OpenAI models (and no model) get the exact `TiktokenCounter`; a model of an unknown
    family the tokenizer-shaped `ApproximateCounter(method="pieces")`; Anthropic and Google
    models an `ApproximateCounter` with the provider's characters per token. It is also what a
    `ProviderCounter` falls back to by default.

    Args:
        model: A LangChain chat model, a model name, or None.
    """
    if model is None:
        return TiktokenCounter("gpt-4o")
    if isinstance(model, str):
        name = model
        family = "openai" if is_openai_model_name(name) else _family_of_name(name)
    else:
        name, family = model_name_of(model), provider_family(model)
    if family == "openai":
        return TiktokenCounter(name or "gpt-4o")
    if family == "unknown":
        return ApproximateCounter(provider=family, method="pieces")
    return ApproximateCounter(provider=family)
