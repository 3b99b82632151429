"""Token accounting: exact OpenAI-style counts offline, and a calibrated approximation.

`TiktokenCounter` counts chat messages the way `ChatOpenAI.get_num_tokens_from_messages` does
(3 tokens per message, 1 per name, 3 per `tool_call_id`, tool call names and arguments, 3 for
reply priming) and adds tool schemas by OpenAI's published function-counting method. Counts are
cached per message, so counting a history that grew by k messages encodes only k messages. The
cache goes by what a message says, never by the object alone: a message edited in place (a block
appended, tool-call arguments changed) is recounted.

`ApproximateCounter` serves other providers: characters per token plus a per-message overhead,
media by each provider's billing formula (`_media`), each part scaled by a ratio learned from the
real `usage_metadata` input tokens providers report (the pipeline keeps them in the ledger).
`counter_for_model` picks one of the two from the model (`_providers`): never a silent OpenAI
tokenizer for a model that is not OpenAI's.

Any callable `Sequence[BaseMessage] -> int` is a `TokenCounter`; pass `len` in tests to make
every message cost one token.

- `counter`: the `TokenCounter` type, `checked_count`, `count_tool_tokens`.
- `exact`: `TiktokenCounter` (with `_encodings`, the verified offline ranks).
- `approximate`: `ApproximateCounter` (with `_media`, the providers' media formulas).
- `provider_count`: `ProviderCounter`, the provider's own count API (with `_gemini_count`).
- `models`: which counter and which window a model gets (with `_providers`, its family).
- `_calibration`: the ratios learned from the provider's reported prompt sizes (with
  `_ratios`, the ratio of each part of the estimate).

The public names of those modules are importable from here too.
"""

from __future__ import annotations

from langgraph_ctx.tokens._encodings import prime_tiktoken_cache
from langgraph_ctx.tokens.approximate import CHARS_PER_TOKEN, ApproximateCounter, pieces_estimate
from langgraph_ctx.tokens.counter import TokenCounter, ToolLike, checked_count, count_tool_tokens
from langgraph_ctx.tokens.exact import (
    REPLY_PRIMING_TOKENS,
    TiktokenCounter,
    count_tokens,
    get_counter,
)
from langgraph_ctx.tokens.models import context_window_for, counter_for_model

__all__ = [
    "CHARS_PER_TOKEN",
    "REPLY_PRIMING_TOKENS",
    "ApproximateCounter",
    "TiktokenCounter",
    "TokenCounter",
    "ToolLike",
    "checked_count",
    "context_window_for",
    "count_tokens",
    "count_tool_tokens",
    "counter_for_model",
    "get_counter",
    "pieces_estimate",
    "prime_tiktoken_cache",
]
