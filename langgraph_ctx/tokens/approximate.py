"""`ApproximateCounter`: characters per token for providers without a public tokenizer.

Characters per token plus a per-message overhead, media by each provider's billing formula
(`_media`), each part of the estimate scaled by a ratio learned from the real
`usage_metadata` input tokens providers report (the pipeline keeps them in the ledger,
`_calibration`).
"""

from __future__ import annotations

import copy
import json
import math
import re
from collections.abc import Mapping, Sequence

from langchain_core.messages import AIMessage, BaseMessage

from langgraph_ctx.checks import check_int, check_number, check_str
from langgraph_ctx.errors import ConfigError
from langgraph_ctx.tokens._media import is_media, media_tokens
from langgraph_ctx.tokens.counter import ToolLike, tool_function, tool_schema
from langgraph_ctx.tokens.exact import REPLY_PRIMING_TOKENS


class ApproximateCounter:
    """Characters-per-token estimate for providers without a public tokenizer, self-calibrating.

    The raw estimate of a message is its text (text blocks, tool-call names and arguments, the
    name) over `chars_per_token`, plus `tokens_per_message`, plus its media billed by the
    provider's formula (images by size, audio by duration, documents by page; never by base64
    length). Tool schemas count as their JSON, plus the provider's tool-use overhead.

    The pipeline scales each part of the raw estimate (`raw_parts`: text, tool calls, media,
    tool schemas, frame) by a ratio learned from the provider's real
    `usage_metadata["input_tokens"]`, kept in the thread's ledger (see `with_ratios`);
    `calibrate` learns one ratio for everything in the object itself for direct use, clamped
    to `[min_ratio, max_ratio]` so one odd report cannot swing the budget.

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
        check_str("provider", provider, example="anthropic")
        if method not in ("chars", "pieces"):
            msg = f"method must be 'chars' or 'pieces', got {method!r}"
            raise ConfigError(msg)
        check_number("chars_per_token", chars_per_token, gt=0, optional=True, example=4.0)
        if chars_per_token is None:
            chars_per_token = CHARS_PER_TOKEN.get(provider, CHARS_PER_TOKEN["unknown"])
        check_int("tokens_per_message", tokens_per_message, example=3)
        check_number("min_ratio", min_ratio, gt=0, le=1, example=0.5)
        check_number("max_ratio", max_ratio, ge=1, example=2.0)
        check_number("smoothing", smoothing, gt=0, le=1, example=0.3)
        self.chars_per_token = float(chars_per_token)
        self.tokens_per_message = tokens_per_message
        self.provider = provider
        self.method = method
        self.min_ratio, self.max_ratio, self.smoothing = min_ratio, max_ratio, smoothing
        self.ratio = 1.0
        """The actual/estimate scale applied to every count (unless `ratios` is set)."""
        self.ratios: dict[str, float] | None = None
        """A scale per part of the estimate (`PARTS`), set by `with_ratios`; None: `ratio`."""
        self.observations = 0

    def with_ratio(self, ratio: float) -> ApproximateCounter:
        """A copy scaling every part of the estimate by one `ratio` (clamped)."""
        twin = copy.copy(self)
        twin.ratios = None
        if isinstance(ratio, (int, float)) and math.isfinite(ratio) and ratio > 0:
            twin.ratio = min(max(float(ratio), self.min_ratio), self.max_ratio)
        return twin

    def with_ratios(self, ratios: Mapping[str, float]) -> ApproximateCounter:
        """A copy scaling each part of the estimate (`PARTS`) by its own ratio.

        A provider bills the parts of a prompt differently (a local server's chat template may
        render message text and drop tool calls and schemas), so one scale learned on one mix
        of parts miscounts another. A ratio may be 0 (a part the provider does not bill) and is
        not clamped to `[min_ratio, max_ratio]`; a part `ratios` leaves out, or gives no finite
        number >= 0, keeps 1. The pipeline passes the ledger's (`tokens._calibration`).
        """
        twin = copy.copy(self)
        twin.ratios = {
            part: float(r)
            if isinstance(r := ratios.get(part), (int, float)) and math.isfinite(r) and r >= 0
            else 1.0
            for part in PARTS
        }
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
        return sum(self.message_parts(message))

    def message_parts(self, message: BaseMessage) -> tuple[float, float, float, float]:
        """Unscaled estimate of one message by part: text, tool calls, media, frame."""
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
        calls = 0.0
        if isinstance(message, AIMessage) and message.tool_calls:
            calls = sum(
                self.text_units((tc.get("name") or "") + json.dumps(tc.get("args"), default=str))
                for tc in message.tool_calls
            )
        name = getattr(message, "name", None)
        if isinstance(name, str):
            parts.append(name)
        text = sum(self.text_units(p) for p in parts)
        return text, calls, float(media), float(self.tokens_per_message)

    def raw(self, messages: Sequence[BaseMessage]) -> float:
        """Unscaled estimate of a message list."""
        return sum(self.raw_message(m) for m in messages) + REPLY_PRIMING_TOKENS

    def raw_parts(
        self, messages: Sequence[BaseMessage], tools: Sequence[ToolLike] = ()
    ) -> dict[str, float]:
        """Unscaled estimate of a prompt by part (`PARTS`), tool schemas included.

        The parts sum to `raw(messages)` plus the tools' raw estimate: what calibration learns
        a ratio for, part by part.
        """
        text = calls = media = 0.0
        frame = float(REPLY_PRIMING_TOKENS)
        for message in messages:
            t, c, m, f = self.message_parts(message)
            text, calls, media, frame = text + t, calls + c, media + m, frame + f
        return {
            "text": text,
            "calls": calls,
            "media": media,
            "tools": self._raw_tools(tools),
            "frame": frame,
        }

    def __call__(self, messages: Sequence[BaseMessage]) -> int:
        """Calibrated estimate of `messages`, rounded up (a `TokenCounter`)."""
        if self.ratios is None:
            return math.ceil(self.raw(messages) * self.ratio - 1e-9)
        r = self.ratios
        total = REPLY_PRIMING_TOKENS * r["frame"]
        for message in messages:
            t, c, m, f = self.message_parts(message)
            total += t * r["text"] + c * r["calls"] + m * r["media"] + f * r["frame"]
        return math.ceil(total - 1e-9)

    def count_tools(self, tools: Sequence[ToolLike]) -> int:
        """Calibrated estimate of tool schemas: their JSON, plus the provider's overhead.

        Anthropic adds a tool-use system prompt (346 tokens with `tool_choice` auto, per its
        pricing docs) whenever tools are bound.
        """
        if not tools:
            return 0
        scale = self.ratio if self.ratios is None else self.ratios["tools"]
        return math.ceil(self._raw_tools(tools) * scale - 1e-9)

    def _raw_tools(self, tools: Sequence[ToolLike]) -> float:
        if not tools:
            return 0.0
        schemas = [tool_schema(t, f"tools[{i}]") for i, t in enumerate(tools)]
        units = sum(
            self.text_units(json.dumps(tool_function(s) or s, sort_keys=True)) for s in schemas
        )
        return units + _TOOL_USE_OVERHEAD.get(self.provider, 0)

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


PARTS = ("text", "calls", "media", "tools", "frame")
"""The parts of a prompt's estimate (`ApproximateCounter.raw_parts`), each scaled by its own
ratio: message text (contents, names), tool calls (names and JSON arguments), media (by the
provider's billing formula), tool schemas (with the provider's tool-use overhead), and the
frame (the per-message overhead and the reply priming)."""


_PIECE_RE = re.compile(r"[^\W\d_]+|\d|\n|[ \t]+|[^\w\s]+|_|\s")


def pieces_estimate(text: str) -> float:
    """A tokenizer-shaped estimate of `text`: what BPE and SentencePiece vocabularies split.

    One token per (ASCII) word up to 6 letters and one more per further 6 (a word in another
    script: one per 2 letters), one per digit and newline, a tenth per space in a run of
    spaces (indentation). A run of ASCII symbols is one token and half a token per further
    symbol: vocabularies merge the common pairs (`":`, `{"`, `->`, `==`, `**`), so a symbol
    each over-counted JSON and markup against prose and code. Other symbols (emoji, box
    drawing) are a token each: byte-level vocabularies split them further. On the real
    trajectories' tool outputs its ratio to a real tokenizer varies much less than
    `chars / 4`'s does, JSON and prose alike (figures in docs/benchmarks.md), so a
    calibrated ratio carries from one prompt to the next.
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
