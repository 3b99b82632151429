"""Token accounting: exact OpenAI-style counts offline, and a calibrated approximation.

`TiktokenCounter` counts chat messages the way `ChatOpenAI.get_num_tokens_from_messages` does
(3 tokens per message, 1 per name, 3 per `tool_call_id`, tool call names and arguments, 3 for
reply priming) and adds tool schemas by OpenAI's published function-counting method. Counts are
cached per message, so counting a history that grew by k messages encodes only k messages. The
cache goes by what a message says, never by the object alone: a message edited in place (a block
appended, tool-call arguments changed) is recounted.

`ApproximateCounter` serves other providers: characters per token plus a per-message overhead,
media by each provider's billing formula (`_media`), scaled by a ratio learned from the real
`usage_metadata` input tokens providers report (the pipeline keeps it in the ledger).
`counter_for_model` picks one of the two from the model (`_providers`): never a silent OpenAI
tokenizer for a model that is not OpenAI's.

Any callable `Sequence[BaseMessage] -> int` is a `TokenCounter`; pass `len` in tests to make
every message cost one token.
"""

from __future__ import annotations

import copy
import itertools
import json
import math
import operator
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.tools import BaseTool

from langgraph_ctx._encodings import encoding_name_for_model, get_encoding
from langgraph_ctx._encodings import prime_tiktoken_cache as prime_tiktoken_cache  # public here
from langgraph_ctx._ids import message_key
from langgraph_ctx._media import is_media, media_tokens
from langgraph_ctx._providers import is_openai_model_name, model_name_of, provider_family
from langgraph_ctx.errors import ConfigError
from langgraph_ctx.messages.validation import check_tool_args, coerce_messages

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
        if self._cache_size == 0:
            self.encoded_messages += 1
            return self._encode_message(message)
        key = message_key(message)
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


def checked_count(counter: TokenCounter, messages: Sequence[BaseMessage]) -> int:
    """`counter(messages)`, refused unless it is a whole number >= 0.

    A custom counter returning `None`, a negative number or a float would otherwise fail far
    from its cause (a `TypeError` in the budget arithmetic) or make the prompt look smaller.

    Raises:
        ConfigError: The counter returned something other than a whole number >= 0.
    """
    tokens = counter(messages)
    if type(tokens) is int and tokens >= 0:  # the usual case: one C-level check
        return tokens
    if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens >= 0:
        return int(tokens)
    msg = (
        f"token_counter returned {type(tokens).__name__} {tokens!r} for {len(messages)} "
        f"message(s); it must return a whole number >= 0 of tokens. Fix the counter {counter!r}, "
        "or pass TiktokenCounter(...) / ApproximateCounter()"
    )
    raise ConfigError(msg)


_counters: dict[str, TiktokenCounter] = {}
_counters_lock = threading.Lock()


def count_tool_tokens(counter: TokenCounter, tools: Sequence[Any]) -> int:
    """Tokens of `tools`' schemas: the counter's `count_tools`, else their JSON as a message.

    Args:
        counter: Any token counter (a plain callable counts the schemas' JSON).
        tools: Tools or schemas, in any form `convert_to_openai_tool` accepts.
    """
    if not tools:
        return 0
    count_tools = getattr(counter, "count_tools", None)
    if callable(count_tools):
        return int(count_tools(list(tools)))
    from langchain_core.utils.function_calling import convert_to_openai_tool

    schemas = json.dumps([convert_to_openai_tool(t) for t in tools], sort_keys=True)
    return counter([SystemMessage(schemas)]) - counter([])


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
    history = coerce_messages(messages)
    check_tool_args(history)  # the converters could not send them; counting would raise
    return get_counter(model).count(history, tools=tools)


class ApproximateCounter:
    """Characters-per-token estimate for providers without a public tokenizer, self-calibrating.

    The raw estimate of a message is its text (text blocks, tool-call names and arguments, the
    name) over `chars_per_token`, plus `tokens_per_message`, plus its media billed by the
    provider's formula (images by size, audio by duration, documents by page; never by base64
    length). Tool schemas count as their JSON, plus the provider's tool-use overhead.

    The pipeline scales the raw estimate by a ratio learned from the provider's real
    `usage_metadata["input_tokens"]`, kept in the thread's ledger (see `with_ratio`);
    `calibrate` learns one in the object itself for direct use. Either way the ratio is
    clamped to `[min_ratio, max_ratio]` so one odd report cannot swing the budget.

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> ApproximateCounter(provider="anthropic")([HumanMessage("x" * 330)])
        106

    Args:
        chars_per_token: Characters per token of the raw estimate; default the provider's
            (Anthropic 3.3, as LangChain's own Claude setting; Google 4.0; others 4.0).
        tokens_per_message: Overhead tokens per message.
        provider: Whose billing formulas media and tool schemas follow: `"anthropic"`,
            `"google"`, `"openai"` or `"unknown"` (billed as OpenAI does).
        method: `"chars"` (characters over `chars_per_token`) or `"pieces"`
            (`pieces_estimate`, tokenizer-shaped; what `counter_for_model` gives a model of an
            unknown provider, whose tokenizer is anyone's guess).
        min_ratio: Lowest learned scale.
        max_ratio: Highest learned scale.
        smoothing: Weight of each new observation in `calibrate`'s moving ratio (0..1].
    """

    def __init__(
        self,
        *,
        chars_per_token: float | None = None,
        tokens_per_message: int = 3,
        provider: str = "unknown",
        method: str = "chars",
        min_ratio: float = 0.5,
        max_ratio: float = 2.0,
        smoothing: float = 0.3,
    ) -> None:
        if not isinstance(provider, str):
            msg = f"provider must be a string such as 'anthropic', got {provider!r}"
            raise ConfigError(msg)
        if method not in ("chars", "pieces"):
            msg = f"method must be 'chars' or 'pieces', got {method!r}"
            raise ConfigError(msg)
        if chars_per_token is None:
            chars_per_token = CHARS_PER_TOKEN.get(provider, CHARS_PER_TOKEN["unknown"])
        if (
            not isinstance(chars_per_token, (int, float))
            or isinstance(chars_per_token, bool)
            or not math.isfinite(chars_per_token)
            or chars_per_token <= 0
        ):
            msg = f"chars_per_token must be a number > 0, got {chars_per_token!r}"
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
        self.chars_per_token = float(chars_per_token)
        self.tokens_per_message = tokens_per_message
        self.provider = provider
        self.method = method
        self.min_ratio, self.max_ratio, self.smoothing = min_ratio, max_ratio, smoothing
        self.ratio = 1.0
        """The actual/estimate scale applied to every count."""
        self.observations = 0

    def with_ratio(self, ratio: float) -> ApproximateCounter:
        """A copy scaling by `ratio` (clamped); the pipeline passes the ledger's ratio."""
        twin = copy.copy(self)
        if isinstance(ratio, (int, float)) and math.isfinite(ratio) and ratio > 0:
            twin.ratio = min(max(float(ratio), self.min_ratio), self.max_ratio)
        return twin

    def text_units(self, text: str) -> float:
        """Unscaled tokens of plain text, by `method`."""
        if self.method == "pieces":
            return pieces_estimate(text)
        return len(text) / self.chars_per_token

    def count_text(self, text: str) -> int:
        """Unscaled tokens of plain text, rounded up."""
        return math.ceil(self.text_units(text))

    def raw_message(self, message: BaseMessage) -> float:
        """Unscaled estimate of one message."""
        parts: list[str] = []
        media = 0
        content = message.content
        for block in [content] if isinstance(content, str) else content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict) and is_media(block):
                media += media_tokens(self.provider, block, self.count_text)
            elif isinstance(block, dict) and isinstance(block.get("text"), str):
                parts.append(block["text"])
            else:
                parts.append(json.dumps(block, default=str))
        if isinstance(message, AIMessage) and message.tool_calls:
            parts.extend(
                (tc.get("name") or "") + json.dumps(tc.get("args"), default=str)
                for tc in message.tool_calls
            )
        name = getattr(message, "name", None)
        if isinstance(name, str):
            parts.append(name)
        text = sum(self.text_units(p) for p in parts)
        return text + self.tokens_per_message + media

    def raw(self, messages: Sequence[BaseMessage]) -> float:
        """Unscaled estimate of a message list."""
        return sum(self.raw_message(m) for m in messages) + REPLY_PRIMING_TOKENS

    def __call__(self, messages: Sequence[BaseMessage]) -> int:
        """Calibrated estimate of `messages`, rounded up (a `TokenCounter`)."""
        return math.ceil(self.raw(messages) * self.ratio - 1e-9)

    def count_tools(self, tools: Sequence[ToolLike]) -> int:
        """Calibrated estimate of tool schemas: their JSON, plus the provider's overhead.

        Anthropic adds a tool-use system prompt (346 tokens with `tool_choice` auto, per its
        pricing docs) whenever tools are bound.
        """
        if not tools:
            return 0
        from langchain_core.utils.function_calling import convert_to_openai_tool

        units = sum(
            self.text_units(json.dumps(convert_to_openai_tool(t)["function"], sort_keys=True))
            for t in tools
        )
        overhead = _TOOL_USE_OVERHEAD.get(self.provider, 0)
        return math.ceil((units + overhead) * self.ratio - 1e-9)

    def calibrate(self, estimated_raw: float, actual_tokens: int) -> float:
        """Learn from one real prompt size; returns the new ratio.

        An observation that is not a finite positive number (zero, negative, NaN, infinity, a
        usage report without a count) is ignored: one NaN would otherwise poison every later
        count.
        """
        if not all(
            isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0
            for x in (estimated_raw, actual_tokens)
        ):
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
        (The pipeline does better: it pairs each reply with the prompt it actually built.)
        """
        prefix = 0.0 + REPLY_PRIMING_TOKENS
        for msg in messages:
            usage = getattr(msg, "usage_metadata", None)
            if isinstance(msg, AIMessage) and usage and usage.get("input_tokens"):
                self.calibrate(prefix, int(usage["input_tokens"]))
            prefix += self.raw_message(msg)
        return self.ratio


_PIECE_RE = re.compile(r"[^\W\d_]+|\d|\n|[ \t]+|[^\w\s]+|_|\s")


def pieces_estimate(text: str) -> float:
    """A tokenizer-shaped estimate of `text`: what BPE and SentencePiece vocabularies split.

    One token per (ASCII) word up to 6 letters and one more per further 6 (a word in another
    script: one per 2 letters), one per digit and newline, a tenth per space in a run of
    spaces (indentation). A run of ASCII symbols is one token and half a token per further
    symbol: vocabularies merge the common pairs (`":`, `{"`, `->`, `==`, `**`), so a symbol
    each over-counted JSON and markup against prose and code. Other symbols (emoji, box
    drawing) are a token each: byte-level vocabularies split them further. On the real
    trajectories' tool outputs its ratio to a real tokenizer varies about a third as much as
    `chars / 4`'s does (coefficient of variation 0.06 against 0.16 for Mistral's
    SentencePiece, 0.10 against 0.18 for OpenAI's o200k), and a JSON tool schema is counted
    within 27% of what prose and code are (44% with a token per symbol), so a calibrated
    ratio carries from one prompt to the next.
    """
    total = 0.0
    for piece in _PIECE_RE.findall(text):
        first = piece[0]
        if first.isalpha():
            if piece.isascii():
                total += 1 + (len(piece) - 1) // 6
            else:  # other scripts split finer (CJK about a token a character): on the safe side
                total += max(1.0, len(piece) / 2)
        elif first in " \t":
            total += 0.1 * len(piece) if len(piece) > 1 else 0.0
        elif len(piece) > 1 and piece.isascii():  # a run of symbols: common pairs merge
            total += 1 + (len(piece) - 1) / 2
        else:
            total += len(piece)
    return total


CHARS_PER_TOKEN: dict[str, float] = {"anthropic": 3.3, "google": 4.0, "openai": 4.0, "unknown": 4.0}
"""Default characters per token of `ApproximateCounter` by provider family (Anthropic's is
LangChain's own Claude setting; Google documents about 4 characters per Gemini token)."""

_TOOL_USE_OVERHEAD = {"anthropic": 346}


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
    approximate = ApproximateCounter(provider=family)
    if use_provider_api and not isinstance(model, str):
        from langgraph_ctx._gemini_count import is_gemini_model
        from langgraph_ctx.provider_count import ProviderCounter

        if family == "anthropic" or (family == "google" and is_gemini_model(model)):
            return ProviderCounter(model, fallback=approximate)
    return approximate


def _family_of_name(name: str) -> str:
    lowered = name.lower()
    if "claude" in lowered:
        return "anthropic"
    if "gemini" in lowered or "gemma" in lowered:
        return "google"
    return "unknown"


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
