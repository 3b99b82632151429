"""Model resolution: which counter and which window a model gets, in one place.

- `counter_for_model`: the counter a chat model gets by default (`_providers.offline_counter`:
  exact tiktoken for OpenAI, the provider's approximation otherwise), or the provider's own
  count API (`ProviderCounter`) when asked.
- `context_window_for`: the window, from an explicit number or the model's profile.
- `shared_counter_for_model`: a model's counter, the per-process shared one for OpenAI models
  (the summarizer's default).
- `CallCounters`: what one call of a `ContextMemory` gets (counter and window) when it goes
  to another model than the configured one (a fallback, a model chosen at run time), read
  off each model object once (`terms_of`).
- `offline_profile`: a `provider:model` name's profile (its window) from the provider
  package's table, with no key and no network (the command line's `--model`).

The pipeline, the summarizer, the memory, its middleware and the call guard all ask here.
"""

from __future__ import annotations

import functools
import importlib
import threading
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from langgraph_ctx.checks import check_bool
from langgraph_ctx.errors import ConfigError
from langgraph_ctx.tokens._gemini_count import is_gemini_model
from langgraph_ctx.tokens._providers import model_name_of, offline_counter, provider_family
from langgraph_ctx.tokens.counter import TokenCounter
from langgraph_ctx.tokens.exact import TiktokenCounter, get_counter
from langgraph_ctx.tokens.provider_count import ProviderCounter


def counter_for_model(model: Any = None, *, use_provider_api: bool = False) -> TokenCounter:
    """The counter a chat model gets by default, chosen from the model itself.

    OpenAI models (`ls_provider` openai or azure with an OpenAI model name) get the exact
    `TiktokenCounter`; Anthropic, Google and every other model (an OpenAI-compatible server
    with a local model, say) get an `ApproximateCounter` with the provider's characters per
    token and billing formulas, which the pipeline calibrates from the provider's real usage.
    No model counts as `gpt-4o`.

    With `use_provider_api=True`, an Anthropic chat model (`ChatAnthropic`) or a Gemini one
    (`ChatGoogleGenerativeAI`) gets a `ProviderCounter`: the provider's own count API
    (Anthropic's through the model's `get_num_tokens_from_messages`, Google's `countTokens`
    through the model's google-genai client), cached per message, the approximation above when
    a call fails. It needs a network and the key; every other model keeps its default counter
    (OpenAI's is exact offline).

    Example:
        >>> type(counter_for_model()).__name__
        'TiktokenCounter'

    Args:
        model: A LangChain chat model, a model name, or None.
        use_provider_api: Count with the provider's own API where its model offers one.
    """
    check_bool("use_provider_api", use_provider_api)
    counter = offline_counter(model)
    if use_provider_api and model is not None and not isinstance(model, str):
        family = provider_family(model)
        if family == "anthropic" or (family == "google" and is_gemini_model(model)):
            return ProviderCounter(model, fallback=counter)
    return counter


def context_window_for(model: Any = None, *, explicit: int | None = None) -> int:
    """The context window in tokens: an explicit number, else the model's profile.

    Args:
        model: A chat model; its `profile["max_input_tokens"]` is used when present.
        explicit: A number that always wins.

    Raises:
        ConfigError: Neither an explicit number nor a profile with `max_input_tokens`.
    """
    if explicit is not None:
        if not isinstance(explicit, int) or isinstance(explicit, bool):
            msg = (
                f"context_window_tokens must be a whole number > 0, got "
                f"{type(explicit).__name__} {explicit!r}; pass the model's input window, "
                "e.g. 128_000"
            )
            raise ConfigError(msg)
        if explicit <= 0:
            msg = (
                f"context_window_tokens must be > 0, got {explicit}; pass the model's input "
                "window, e.g. 128_000"
            )
            raise ConfigError(msg)
        return explicit
    profile = getattr(model, "profile", None) or {}
    window = profile.get("max_input_tokens") if isinstance(profile, dict) else None
    if isinstance(window, int) and not isinstance(window, bool) and window > 0:
        return window
    if isinstance(model, str):
        what = f"the model name {model!r} (a name carries no profile)"
    else:
        what = type(model).__name__ if model is not None else "no model"
    found = "" if window is None else f" (it is {window!r}, not a whole number > 0)"
    msg = (
        f"cannot tell the context window of {what}: it has no usable "
        f"profile['max_input_tokens']{found}; pass context_window_tokens=... explicitly"
    )
    raise ConfigError(msg)


def shared_counter_for_model(model: Any) -> TokenCounter:
    """`counter_for_model(model)`; an OpenAI model's is the shared one (`get_counter`).

    The summarizer's default counter.
    """
    counter = counter_for_model(model)
    if isinstance(counter, TiktokenCounter):  # the per-process instance keeps its cache
        return get_counter(counter.model)
    return counter


_OWN_COUNTER_FAMILIES = ("anthropic", "google")
"""Provider families a memory without a model counts with their own counter (`counter_for`)."""


@dataclass(frozen=True, slots=True)
class ModelTerms:
    """What the package reads off one chat model object, once: its family, name and window."""

    family: str
    """`provider_family(model)`."""
    name: str
    """`model_name_of(model)`."""
    window: int | None
    """The profile's `max_input_tokens` when it is a whole number > 0, else None."""


def terms_of(model: Any) -> ModelTerms:
    """The `ModelTerms` of `model`, read from the model itself (not cached)."""
    profile = getattr(model, "profile", None)
    own = profile.get("max_input_tokens") if isinstance(profile, Mapping) else None
    window = own if isinstance(own, int) and not isinstance(own, bool) and own > 0 else None
    return ModelTerms(provider_family(model), model_name_of(model), window)


class CallCounters:
    """The counter and window of each call of a `ContextMemory`, resolved once per model.

    A model object's terms (`terms_of`) are read the first time a call goes to it and kept
    while the object lives (models are not hashable, so the cache is keyed by identity and
    dropped with the object); counters are made once per provider family and model name.
    See `ContextMemory.counter_for`: a call to the configured model (or one of the same family
    and name) is counted with the configured counter; a call to another model with
    `counter_for_model(model)`. See `ContextMemory.window_for` for the window.
    """

    def __init__(self) -> None:
        self._counters: dict[tuple[str, str], TokenCounter] = {}
        self._terms: dict[int, tuple[weakref.ref[Any], ModelTerms]] = {}
        self._lock = threading.Lock()

    def terms(self, model: Any) -> ModelTerms:
        """`terms_of(model)`, read once per model object."""
        key = id(model)
        with self._lock:
            entry = self._terms.get(key)
        if entry is not None and entry[0]() is model:
            return entry[1]
        terms = terms_of(model)
        try:
            ref = weakref.ref(model, functools.partial(self._forget, key))
        except TypeError:  # a model that takes no weak reference (a str name): not kept
            return terms
        with self._lock:
            self._terms[key] = (ref, terms)
        return terms

    def _forget(self, key: int, _ref: object = None) -> None:
        with self._lock:
            entry = self._terms.get(key)
            if entry is not None and entry[0]() is None:
                del self._terms[key]

    def counter_for(
        self, model: Any, *, configured_model: Any, configured: TokenCounter, explicit: bool
    ) -> TokenCounter:
        """The counter of a call to `model` (`ContextMemory.counter_for`).

        Args:
            model: The model called, or None for the configured one.
            configured_model: The model the memory was configured with, or None.
            configured: The configured counter (the manager's `token_counter`).
            explicit: A `token_counter=` was given: it counts every call.
        """
        if model is None or model is configured_model or explicit:
            return configured
        terms = self.terms(model)
        key = (terms.family, terms.name)
        if configured_model is None and terms.family not in _OWN_COUNTER_FAMILIES:
            return configured
        if configured_model is not None:
            mine = self.terms(configured_model)
            if key == (mine.family, mine.name):
                return configured
        with self._lock:
            counter = self._counters.get(key)
            if counter is None:
                counter = self._counters[key] = counter_for_model(model)
        return counter

    def window_for(self, model: Any, *, configured_model: Any, configured: int) -> int:
        """The window of a call to `model` (`ContextMemory.window_for`).

        The `configured` window, or the called model's profile `max_input_tokens` when it has
        one and it is smaller. The configured model itself, or a model without a profile, gets
        the configured window.
        """
        if model is None or model is configured_model:
            return configured
        own = self.terms(model).window
        return own if own is not None and own < configured else configured


# --- profiles without a model ------------------------------------------------------------------

_PROVIDERS = {
    "openai": "langchain_openai",
    "azure_openai": "langchain_openai",
    "anthropic": "langchain_anthropic",
    "google_genai": "langchain_google_genai",
}


def offline_profile(spec: str) -> dict[str, Any] | None:
    """The profile of `provider:model` from its provider package's table, with no key or network.

    The one place that reads a provider package's profile table (`<package>.data._profiles`,
    what `init_chat_model(spec).profile` would give without constructing the model, which may
    want a key). A name without a provider is guessed from its prefix (claude, gemini, else
    OpenAI). None when the package or the model is not in the table.
    """
    provider, _, name = spec.partition(":") if ":" in spec else ("", "", spec)
    if not provider:
        lowered = name.lower()
        provider = (
            "anthropic"
            if lowered.startswith("claude")
            else "google_genai"
            if lowered.startswith("gemini")
            else "openai"
        )
    package = _PROVIDERS.get(provider, f"langchain_{provider}")
    try:
        table = importlib.import_module(f"{package}.data._profiles")._PROFILES
    except (ImportError, AttributeError):
        return None
    profile = table.get(name) if isinstance(table, dict) else None
    return dict(profile) if isinstance(profile, dict) else None
