"""`TiktokenCounter`: exact OpenAI-style counts offline, cached per message.

It counts chat messages the way `ChatOpenAI.get_num_tokens_from_messages` does (3 tokens per
message, 1 per name, 3 per `tool_call_id`, tool call names and arguments, 3 for reply priming)
and adds tool schemas by OpenAI's published function-counting method. Counts are cached per
message, so counting a history that grew by k messages encodes only k messages. The cache goes
by what a message says, never by the object alone: a message edited in place (a block appended,
tool-call arguments changed) is recounted.
"""

from __future__ import annotations

import copy
import itertools
import json
import operator
import threading
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage

from langgraph_ctx._ids import message_key
from langgraph_ctx._lru import LRUCache
from langgraph_ctx.checks import check_int
from langgraph_ctx.errors import ConfigError, shorten
from langgraph_ctx.messages.validation import check_tool_args, coerce_messages
from langgraph_ctx.tokens._encodings import (
    encoding_name_for_model,
    get_encoding,
    text_tokens,
)
from langgraph_ctx.tokens._media import is_media, media_tokens
from langgraph_ctx.tokens._text_tokens import TextTokens
from langgraph_ctx.tokens.counter import ToolLike, tool_function, tool_schema

_FIELDS = operator.attrgetter("__dict__")


class _Unequal:
    """A snapshot that equals nothing: the message is looked up by key on every count."""

    def __eq__(self, other: object) -> bool:
        return False

    __hash__ = None  # type: ignore[assignment]


def _copied(value: Any) -> Any:
    # Lists and dicts copied all the way down, everything else shared: messages hold JSON-like
    # data, and sharing strings makes comparing an unchanged message short-cut on identity.
    if type(value) is list:
        return [_copied(v) for v in value]
    if type(value) is dict:
        return {k: _copied(v) for k, v in value.items()}
    if isinstance(value, list | dict | set):  # a subclass: copy it faithfully, rarely met
        return copy.deepcopy(value)
    return value


def _snapshot(message: BaseMessage) -> Any:
    # Every field by value: an edit in place (a block appended, an argument changed) no longer
    # equals it, while an untouched message does.
    try:
        return _copied(message.__dict__)
    except Exception:  # a field that cannot be copied: always confirm by key instead
        return _Unequal()


REPLY_PRIMING_TOKENS = 3
"""Every reply is primed with `<|start|>assistant<|message|>`."""


# OpenAI cookbook, "How to count tokens with tiktoken", num_tokens_for_tools (gpt-4o family).
_FUNC_INIT, _PROP_INIT, _PROP_KEY, _ENUM_INIT, _ENUM_ITEM, _FUNC_END = 7, 3, 3, -3, 3, 12


_FUNC_INIT_LEGACY = 10  # gpt-3.5-turbo / gpt-4


def _convert_message_to_dict(message: BaseMessage) -> dict[str, Any]:
    # The one upstream private helper we use: it is exactly what ChatOpenAI counts.
    from langchain_openai.chat_models.base import _convert_message_to_dict as convert

    return convert(message)  # type: ignore[no-any-return]


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
        _check_model(model)
        check_int("cache_size", cache_size, example=200_000, note="0 disables the cache")
        self.model = model
        self.encoding_name = encoding_name_for_model(model)
        self._encoding: Any = None
        self._text: TextTokens | None = None
        if model.startswith("gpt-3.5-turbo-0301"):
            self.tokens_per_message, self.tokens_per_name = 4, -1
        else:
            self.tokens_per_message, self.tokens_per_name = 3, 1
        self._cache: LRUCache[tuple[Any, ...], int] = LRUCache(max_items=cache_size)
        self._lock = threading.Lock()  # guards `_last` and `encoded_messages`
        # The previous message list, a snapshot of each message and its count (fast path).
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
        """Tokens of plain text (special-token strings are counted as ordinary text).

        Short ASCII text is counted without releasing the GIL (`_text_tokens`): beside a busy
        thread, each release cost a count the interpreter's switch interval.
        """
        if self._text is None:
            self._text = text_tokens(self.encoding_name)
        return self._text(text)

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
                    elif is_media(item):  # by OpenAI's billing formula, never base64 length
                        count += media_tokens("openai", item, self.count_text)
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
        if self._cache.max_items == 0:
            self.encoded_messages += 1
            return self._encode_message(message)
        return self._cached_or_encoded(message, message_key(message))

    def _cached_or_encoded(self, message: BaseMessage, key: tuple[Any, ...]) -> int:
        hit = self._cache.get(key)  # a repeat of an earlier miss in one list is a hit here
        if hit is not None:
            return hit
        value = self._encode_message(message)
        with self._lock:
            self.encoded_messages += 1
        self._cache.put(key, value)
        return value

    def _count_messages(self, messages: Sequence[BaseMessage]) -> int:
        if self._cache.max_items == 0:
            return sum(self.count_message(m) for m in messages)
        # Fast path for a history that grew: a message the previous list held at the same
        # position keeps its count when it still equals the snapshot taken when it was counted.
        # Identity alone is not enough: agents edit messages in place (a content list appended
        # to, tool-call args changed), and such a message is the same object saying more.
        # Comparing a snapshot is C-level equality that short-cuts on identical strings, so the
        # old part costs well under a microsecond per message; only changed or new messages
        # are keyed and looked up, and only new content is encoded.
        with self._lock:
            old_messages, old_snapshots, old_counts = self._last
        n = min(len(old_messages), len(messages))
        same = list(map(operator.is_, old_messages[:n], messages[:n]))
        try:
            unchanged = list(map(operator.eq, old_snapshots[:n], map(_FIELDS, messages[:n])))
        except Exception:  # a field whose `==` raises (an array, say): confirm every key
            unchanged = [False] * n
        ok = list(map(operator.and_, same, unchanged))
        counts = old_counts[:n] + [0] * (len(messages) - n)
        snapshots = old_snapshots[:n] + [None] * (len(messages) - n)
        todo = [*itertools.compress(range(n), map(operator.not_, ok)), *range(n, len(messages))]
        for i, count in zip(todo, self._lookup([messages[i] for i in todo]), strict=True):
            counts[i], snapshots[i] = count, _snapshot(messages[i])
        if len(messages) > 1:  # a one-message count must not evict the remembered prompt
            with self._lock:
                self._last = (list(messages), snapshots, counts)
        return sum(counts)

    def _lookup(self, messages: Sequence[BaseMessage]) -> list[int]:
        keys = [message_key(m) for m in messages]
        hits = self._cache.get_many(keys)  # one lock round: in a grown history most are hits
        return [
            hit if hit is not None else self._cached_or_encoded(message, key)
            for message, key, hit in zip(messages, keys, hits, strict=True)
        ]

    def count_tools(self, tools: Sequence[ToolLike]) -> int:
        """Tokens of tool schemas by OpenAI's published function-counting method."""
        if not tools:
            return 0
        # The cookbook's gpt-3.5-turbo / gpt-4 constants; the gpt-4o family and later use 7.
        legacy = self.model.startswith(("gpt-3.5", "gpt-4")) and not self.model.startswith(
            ("gpt-4o", "gpt-4.1", "gpt-4.5")
        )
        total = 0
        for i, tool in enumerate(tools):
            schema = tool_schema(tool, f"tools[{i}]")
            total += _FUNC_INIT_LEGACY if legacy else _FUNC_INIT
            function = tool_function(schema)
            if function is None:  # a built-in tool: its JSON text
                total += self.count_text(json.dumps(schema, sort_keys=True))
                continue
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
        self._cache.clear()
        with self._lock:
            self._last = ([], [], [])


_counters: dict[str, TiktokenCounter] = {}


_counters_lock = threading.Lock()


def _check_model(model: Any) -> None:
    if not isinstance(model, str):
        msg = (
            f"model must be an OpenAI model name, got {type(model).__name__} {shorten(model)}; "
            "pass a string such as 'gpt-4o' (unknown names count with cl100k_base)"
        )
        raise ConfigError(msg)


def get_counter(model: str = "gpt-4o") -> TiktokenCounter:
    """The shared `TiktokenCounter` of a model (one per model name, per process)."""
    _check_model(model)  # before it is a key of the shared dict
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
    history = coerce_messages(messages)
    check_tool_args(history)  # the converters could not send them; counting would raise
    return get_counter(model).count(history, tools=tools)
