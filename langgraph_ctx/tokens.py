"""Token accounting: exact OpenAI-style counts offline, and a calibrated approximation.

`TiktokenCounter` counts chat messages the way `ChatOpenAI.get_num_tokens_from_messages` does
(3 tokens per message, 1 per name, 3 per `tool_call_id`, tool call names and arguments, 3 for
reply priming) and adds tool schemas by OpenAI's published function-counting method. Counts are
cached per message, so counting a history that grew by k messages encodes only k messages.

`ApproximateCounter` serves other providers: characters per token plus a per-message overhead,
scaled by a ratio it learns from the real `usage_metadata` input tokens providers report.

Any callable `Sequence[BaseMessage] -> int` is a `TokenCounter`; pass `len` in tests to make
every message cost one token.
"""

from __future__ import annotations

import json
import operator
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.tools import BaseTool

from langgraph_ctx._encodings import encoding_name_for_model, get_encoding
from langgraph_ctx.errors import ConfigError
from langgraph_ctx.messages import coerce_messages

_CONTENT = operator.attrgetter("content")

TokenCounter = Callable[[Sequence[BaseMessage]], int]
"""Anything that counts the tokens of a message list (langchain's convention)."""

ToolLike = dict[str, Any] | type | Callable[..., Any] | BaseTool

REPLY_PRIMING_TOKENS = 3
"""Every reply is primed with `<|start|>assistant<|message|>`."""

# OpenAI cookbook, "How to count tokens with tiktoken", num_tokens_for_tools (gpt-4o family).
_FUNC_INIT, _PROP_INIT, _PROP_KEY, _ENUM_INIT, _ENUM_ITEM, _FUNC_END = 7, 3, 3, -3, 3, 12
_FUNC_INIT_LEGACY = 10  # gpt-3.5-turbo / gpt-4


def _convert_message_to_dict(message: BaseMessage) -> dict[str, Any]:
    # The one upstream private helper we use: it is exactly what ChatOpenAI counts.
    from langchain_openai.chat_models.base import _convert_message_to_dict as convert

    return convert(message)  # type: ignore[no-any-return]


# Key order is kept (no sort_keys): the count encodes `json.dumps(args)`, which keeps it too.
# One shared encoder: `json.dumps(..., default=...)` would build a new one per call.
_KEY_ENCODER = json.JSONEncoder(ensure_ascii=False, default=str)

# The `additional_kwargs` entries `_convert_message_to_dict` reads, so they change the count.
_COUNTED_KWARGS = ("name", "tool_calls", "function_call", "audio", "__openai_role__")


def _content_key(value: Any) -> Any:
    if value is None or isinstance(value, str):
        return value  # str hashes are cached by Python: O(1) after the first time
    return _KEY_ENCODER.encode(value)


def _calls_key(calls: Any) -> Any:
    # What the count reads of each call: id, name and the arguments. `repr` tells apart every
    # JSON value (1, 1.0, True, "1") and is several times cheaper than encoding them.
    if not calls:
        return None
    try:
        return tuple((c.get("id"), c.get("name"), repr(c.get("args"))) for c in calls)
    except AttributeError:  # not a list of dicts: key on all of it
        return _content_key(calls)


def _message_key(message: BaseMessage) -> tuple[Any, ...]:
    # Everything the OpenAI message dict is built from, so a changed message is recounted.
    # Fields are read from the pydantic instance dict: `getattr(msg, "tool_calls", None)` on a
    # message type without that field goes through pydantic's raising `__getattr__`, which
    # made the lookup of a cached message cost more than ten microseconds.
    fields = message.__dict__
    kwargs = message.additional_kwargs
    extra = (
        tuple((k, _content_key(kwargs[k])) for k in _COUNTED_KWARGS if k in kwargs)
        if kwargs
        else ()
    )
    return (
        message.type,
        fields.get("id"),
        _content_key(fields.get("content")),
        fields.get("name"),
        fields.get("tool_call_id"),
        _calls_key(fields.get("tool_calls")),
        _calls_key(fields.get("invalid_tool_calls")),
        extra,
    )


class TiktokenCounter:
    """Exact OpenAI token counter with a per-message cache.

    Callable on a message list like langchain's token counters. The encoding follows the model
    name (unknown names fall back as langchain-openai does) and is built offline.

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> counter = TiktokenCounter("gpt-4o")
        >>> counter([HumanMessage("hello")])
        8

    Args:
        model: OpenAI model name; picks the encoding and the per-message overheads.
        cache_size: How many per-message counts to keep (least recently used go first).
    """

    def __init__(self, model: str = "gpt-4o", *, cache_size: int = 200_000) -> None:
        if not isinstance(model, str):
            msg = (
                f"model must be an OpenAI model name, got {type(model).__name__} {model!r}; "
                "pass a string such as 'gpt-4o' (unknown names count with cl100k_base)"
            )
            raise ConfigError(msg)
        if cache_size < 0:
            msg = f"cache_size must be >= 0, got {cache_size}; use 0 to disable the cache"
            raise ConfigError(msg)
        self.model = model
        self.encoding_name = encoding_name_for_model(model)
        self._encoding: Any = None
        if model.startswith("gpt-3.5-turbo-0301"):
            self.tokens_per_message, self.tokens_per_name = 4, -1
        else:
            self.tokens_per_message, self.tokens_per_name = 3, 1
        self._cache: OrderedDict[tuple[Any, ...], int] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()
        self._last: tuple[list[BaseMessage], list[Any], list[int]] = ([], [], [])
        self.encoded_messages = 0
        """How many messages were encoded (cache misses); benchmarks read it."""

    @property
    def encoding(self) -> Any:
        """The `tiktoken.Encoding`, loaded on first use."""
        if self._encoding is None:
            self._encoding = get_encoding(self.encoding_name)
        return self._encoding

    def count_text(self, text: str) -> int:
        """Tokens of plain text (special-token strings are counted as ordinary text)."""
        return len(self.encoding.encode(text, disallowed_special=()))

    def _encode_message(self, message: BaseMessage) -> int:
        count = self.tokens_per_message
        for key, value in _convert_message_to_dict(message).items():
            if key == "tool_call_id":
                count += 3
                continue
            if isinstance(value, list):
                for item in value:
                    if isinstance(item, str):
                        count += self.count_text(item)
                    elif item.get("type") == "text":
                        count += self.count_text(item["text"])
                    elif item.get("type") == "image_url":
                        # Low detail costs 85; other sizes would need the image itself.
                        count += 85
                    elif item.get("type") == "function":
                        count += self.count_text(item["function"]["arguments"])
                        count += self.count_text(item["function"]["name"])
                    else:
                        count += self.count_text(json.dumps(item, sort_keys=True, default=str))
            elif not value:
                continue
            else:
                count += self.count_text(str(value))
            if key == "name":
                count += self.tokens_per_name
        return count

    def count_message(self, message: BaseMessage) -> int:
        """Tokens of one message including its per-message overhead (cached)."""
        if self._cache_size == 0:
            self.encoded_messages += 1
            return self._encode_message(message)
        key = _message_key(message)
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                return hit
        return self._encode_and_store(message, key)

    def _encode_and_store(self, message: BaseMessage, key: tuple[Any, ...]) -> int:
        value = self._encode_message(message)
        with self._lock:
            self.encoded_messages += 1
            self._cache[key] = value
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return value

    def _count_messages(self, messages: Sequence[BaseMessage]) -> int:
        if self._cache_size == 0:
            return sum(self.count_message(m) for m in messages)
        # Fast path for a history that grew: the messages (and their content objects) that
        # the previous list held at the same positions keep their counts without a lookup, so
        # a call costs pointer comparisons for the old part and encodes only the new one.
        with self._lock:
            old_messages, old_contents, old_counts = self._last
        contents = list(map(_CONTENT, messages))  # C-level loops: pointer work only
        n = min(len(old_messages), len(messages))
        same = list(map(operator.is_, old_messages[:n], messages[:n]))
        same_content = list(map(operator.is_, old_contents[:n], contents[:n]))
        shared = min(
            same.index(False) if False in same else n,
            same_content.index(False) if False in same_content else n,
        )
        counts = old_counts[:shared] + self._lookup(messages[shared:])
        if len(messages) > 1:  # a one-message count must not evict the remembered prompt
            with self._lock:
                self._last = (list(messages), contents, counts)
        return sum(counts)

    def _lookup(self, messages: Sequence[BaseMessage]) -> list[int]:
        keys = [_message_key(m) for m in messages]
        counts: list[int] = [0] * len(keys)
        misses: list[int] = []
        with self._lock:  # one lock round for all lookups: in a grown history most are hits
            cache = self._cache
            for i, key in enumerate(keys):
                hit = cache.get(key)
                if hit is None:
                    misses.append(i)
                else:
                    cache.move_to_end(key)
                    counts[i] = hit
        for i in misses:
            with self._lock:
                hit = self._cache.get(keys[i])  # a repeat of an earlier miss in this list
            counts[i] = hit if hit is not None else self._encode_and_store(messages[i], keys[i])
        return counts

    def count_tools(self, tools: Sequence[ToolLike]) -> int:
        """Tokens of tool schemas by OpenAI's published function-counting method."""
        if not tools:
            return 0
        from langchain_core.utils.function_calling import convert_to_openai_tool

        # The cookbook's gpt-3.5-turbo / gpt-4 constants; the gpt-4o family and later use 7.
        legacy = self.model.startswith(("gpt-3.5", "gpt-4")) and not self.model.startswith(
            ("gpt-4o", "gpt-4.1", "gpt-4.5")
        )
        total = 0
        for tool in tools:
            function = convert_to_openai_tool(tool)["function"]
            total += _FUNC_INIT_LEGACY if legacy else _FUNC_INIT
            desc = str(function.get("description") or "").removesuffix(".")
            total += self.count_text(f"{function['name']}:{desc}")
            properties = (function.get("parameters") or {}).get("properties") or {}
            if properties:
                total += _PROP_INIT
                for name, prop in properties.items():
                    total += _PROP_KEY
                    for item in prop.get("enum") or ():
                        total += _ENUM_ITEM + self.count_text(str(item))
                    if prop.get("enum"):
                        total += _ENUM_INIT
                    ptype = prop.get("type") or json.dumps(
                        {k: v for k, v in prop.items() if k != "description"}, sort_keys=True
                    )
                    pdesc = str(prop.get("description") or "").removesuffix(".")
                    total += self.count_text(f"{name}:{ptype}:{pdesc}")
        return total + _FUNC_END

    def count(
        self, messages: Sequence[BaseMessage], *, tools: Sequence[ToolLike] | None = None
    ) -> int:
        """Tokens of a prompt: messages, reply priming, and tool schemas when given."""
        total = self._count_messages(messages) + REPLY_PRIMING_TOKENS
        return total + (self.count_tools(tools) if tools else 0)

    def __call__(self, messages: Sequence[BaseMessage]) -> int:
        """Tokens of `messages` with reply priming (a `TokenCounter`)."""
        return self.count(messages)

    def cache_clear(self) -> None:
        """Forget every cached per-message count."""
        with self._lock:
            self._cache.clear()
            self._last = ([], [], [])


_counters: dict[str, TiktokenCounter] = {}
_counters_lock = threading.Lock()


def get_counter(model: str = "gpt-4o") -> TiktokenCounter:
    """The shared `TiktokenCounter` of a model (one per model name, per process)."""
    with _counters_lock:
        if model not in _counters:
            _counters[model] = TiktokenCounter(model)
        return _counters[model]


def count_tokens(
    messages: Sequence[BaseMessage],
    *,
    model: str = "gpt-4o",
    tools: Sequence[ToolLike] | None = None,
) -> int:
    """Count the prompt tokens of `messages` for an OpenAI model, offline.

    Without `tools` this equals `ChatOpenAI(model=model).get_num_tokens_from_messages(messages)`.
    With `tools` the schemas are added by OpenAI's function-counting method (ChatOpenAI
    ignores them).

    Example:
        >>> from langchain_core.messages import HumanMessage, SystemMessage
        >>> count_tokens([SystemMessage("Be brief."), HumanMessage("hi")])
        15

    Dicts, tuples and strings are taken as `add_messages` takes them
    (`{"role": "user", "content": "hi"}`); anything else raises `InvalidMessagesError`.
    """
    return get_counter(model).count(coerce_messages(messages), tools=tools)


class ApproximateCounter:
    """Characters-per-token estimate for providers without a public tokenizer, self-calibrating.

    The raw estimate is `chars / chars_per_token + tokens_per_message` per message. `calibrate`
    feeds it real prompt sizes (`usage_metadata["input_tokens"]`); the learned ratio
    actual/estimate scales later counts, moving smoothly and clamped to `[min_ratio, max_ratio]`
    so one odd report cannot swing the budget.

    Args:
        chars_per_token: Characters per token of the raw estimate.
        tokens_per_message: Overhead tokens per message.
        min_ratio: Lowest learned scale.
        max_ratio: Highest learned scale.
        smoothing: Weight of each new observation in the moving ratio (0..1].
    """

    def __init__(
        self,
        *,
        chars_per_token: float = 4.0,
        tokens_per_message: int = 3,
        min_ratio: float = 0.5,
        max_ratio: float = 2.0,
        smoothing: float = 0.3,
    ) -> None:
        if chars_per_token <= 0:
            msg = f"chars_per_token must be > 0, got {chars_per_token}"
            raise ConfigError(msg)
        if not 0 < min_ratio <= 1 <= max_ratio:
            msg = f"need 0 < min_ratio <= 1 <= max_ratio, got {min_ratio}, {max_ratio}"
            raise ConfigError(msg)
        if not 0 < smoothing <= 1:
            msg = f"smoothing must be in (0, 1], got {smoothing}"
            raise ConfigError(msg)
        if not isinstance(tokens_per_message, int) or tokens_per_message < 0:
            msg = f"tokens_per_message must be a whole number >= 0, got {tokens_per_message!r}"
            raise ConfigError(msg)
        self.chars_per_token = chars_per_token
        self.tokens_per_message = tokens_per_message
        self.min_ratio, self.max_ratio, self.smoothing = min_ratio, max_ratio, smoothing
        self.ratio = 1.0
        """The learned actual/estimate scale."""
        self.observations = 0

    def raw_message(self, message: BaseMessage) -> float:
        """Unscaled estimate of one message."""
        chars = (
            len(message.content)
            if isinstance(message.content, str)
            else len(json.dumps(message.content, default=str))
        )
        if isinstance(message, AIMessage) and message.tool_calls:
            chars += len(json.dumps(message.tool_calls, default=str))
        name = getattr(message, "name", None)
        chars += len(name) if name else 0
        return chars / self.chars_per_token + self.tokens_per_message

    def raw(self, messages: Sequence[BaseMessage]) -> float:
        """Unscaled estimate of a message list."""
        return sum(self.raw_message(m) for m in messages) + REPLY_PRIMING_TOKENS

    def __call__(self, messages: Sequence[BaseMessage]) -> int:
        """Calibrated estimate of `messages`, rounded up (a `TokenCounter`)."""
        return int(self.raw(messages) * self.ratio + 0.999)

    def calibrate(self, estimated_raw: float, actual_tokens: int) -> float:
        """Learn from one real prompt size; returns the new ratio."""
        if estimated_raw <= 0 or actual_tokens <= 0:
            return self.ratio
        observed = min(max(actual_tokens / estimated_raw, self.min_ratio), self.max_ratio)
        weight = 1.0 if self.observations == 0 else self.smoothing
        self.ratio = min(
            max(self.ratio + weight * (observed - self.ratio), self.min_ratio), self.max_ratio
        )
        self.observations += 1
        return self.ratio

    def calibrate_from_history(self, messages: Sequence[BaseMessage]) -> float:
        """Calibrate from each AI message's `usage_metadata` against the history before it.

        The history before an AI message is taken as the prompt that produced it, which holds
        when the prompt was not trimmed; call `calibrate` directly when you know the prompt.
        """
        prefix = 0.0 + REPLY_PRIMING_TOKENS
        for msg in messages:
            usage = getattr(msg, "usage_metadata", None)
            if isinstance(msg, AIMessage) and usage and usage.get("input_tokens"):
                self.calibrate(prefix, int(usage["input_tokens"]))
            prefix += self.raw_message(msg)
        return self.ratio


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
