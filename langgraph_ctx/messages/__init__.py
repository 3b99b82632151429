"""The message model every strategy shares: blocks, turns, provider rules, ids and tags.

- `content`: a message's text, the package's tag on it, its id, error results.
- `blocks`: blocks and turns, the tool-call pairing rule every cut of a history follows.
- `validation`: the OpenAI and Anthropic message rules, and reading a history as messages.
- `repair`: what a prompt shows instead of a broken pairing or a misplaced message.
- `base`: the base system prompt at the head of a history, and the summary it may carry.

The names of those modules are importable from here too (`langgraph_ctx.messages.text_of`).
"""

from __future__ import annotations

from langgraph_ctx.messages.blocks import (
    Block,
    BlockKind,
    Turn,
    is_user_input,
    sent_calls,
    shown_call_ids,
    split_blocks,
    split_turns,
)
from langgraph_ctx.messages.content import (
    TAG_KEY,
    ensure_ids,
    get_tag,
    is_blank,
    is_error_result,
    is_tool_output,
    text_of,
    with_id,
    with_tag,
)
from langgraph_ctx.messages.repair import (
    RepairResult,
    conversation_start_message,
    in_conversation_form,
    needs_conversation_form,
    repair_messages,
)
from langgraph_ctx.messages.validation import (
    Problem,
    Provider,
    check_messages,
    check_tool_args,
    check_unique_ids,
    coerce_messages,
    validate_messages,
)

__all__ = [
    "TAG_KEY",
    "Block",
    "BlockKind",
    "Problem",
    "Provider",
    "RepairResult",
    "Turn",
    "check_messages",
    "check_tool_args",
    "check_unique_ids",
    "coerce_messages",
    "conversation_start_message",
    "ensure_ids",
    "get_tag",
    "in_conversation_form",
    "is_blank",
    "is_error_result",
    "is_tool_output",
    "is_user_input",
    "needs_conversation_form",
    "repair_messages",
    "sent_calls",
    "shown_call_ids",
    "split_blocks",
    "split_turns",
    "text_of",
    "validate_messages",
    "with_id",
    "with_tag",
]
