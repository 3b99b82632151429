"""What a `PromptView` holds, and what strategies read of its window: `ViewData`.

The fields of the view (the history, the base prompt, the ledger, the budget, the counter, the
report ...), the window (`window_indices`, `window_blocks`, `protected_from`) and the token
cost of a message (`cost`). `PromptView` (`langgraph_ctx.prompt.view`) builds on it:
`ViewRendering` renders the prompt, `ViewEdits` edits it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from langchain_core.messages import AIMessage, BaseMessage

from langgraph_ctx._effects import Resources
from langgraph_ctx.ledger.schema import ContextLedger
from langgraph_ctx.messages.blocks import Block, is_user_input, split_blocks
from langgraph_ctx.messages.content import get_tag
from langgraph_ctx.prompt.render import RenderCache
from langgraph_ctx.prompt.report import ContextBudget, ContextCostReport, Decision, DecisionKind
from langgraph_ctx.tokens.counter import TokenCounter, checked_count

SummaryPlacement = Literal["separate", "merged"]


@dataclass(kw_only=True, eq=False)
class ViewData:
    """The data of a `PromptView` and the reads of its window (see `PromptView`)."""

    history: list[BaseMessage]
    """The conversation after the base system prompt (the graph's messages, never mutated)."""
    base: list[BaseMessage]
    """The leading system and developer messages (merged into one base system prompt)."""
    base_offset: int = 0
    """Position of `history[0]` in the list the build was given (for derived ids)."""
    render_cache: RenderCache = field(default_factory=lambda: RenderCache())
    """Messages rendered before, reused so that equal messages are the same objects from call
    to call (the token counter then skips them by identity)."""
    ledger: ContextLedger
    """What earlier builds recorded (pruned, compacted, window, summary, hint, entities)."""
    budget: ContextBudget
    """The token budget of the model called."""
    counter: TokenCounter
    """Counts tokens of message lists."""
    tool_tokens: int
    """Tokens the tool schemas take."""
    static_fragments: list[str]
    """System-prompt fragments of this call (skills, injections)."""
    memory_items: list[str]
    """Retrieved memory items, injected as `<relevant_context>`."""
    resources: Resources
    """The I/O a strategy may ask for (archive writes, summaries, extraction), as plans."""
    summary_placement: SummaryPlacement = "separate"
    """Where the running summary goes: its own system message, or merged into the base."""
    search_tool: str | None = None
    """The bound search tool's name (`search_tool_name`): excerpt footers and the summary's
    archive note say it finds their hidden lines. None when the call binds none."""
    strategies: Sequence[Any] = ()
    """The build's strategies, in order (a strategy may look for another one in the list)."""
    repairs: list[str] = field(default_factory=list)
    """Ledger parts left out on load (`repair_ledger`); reported as a `repair` decision."""
    report: ContextCostReport = field(init=False)
    """The report this build is writing."""
    start: int = field(init=False, default=0)
    """History index where the window starts."""
    pin: int | None = field(init=False, default=None)
    """History index of the task pinned in front of the window, if any."""
    memory_dropped: bool = field(init=False, default=False)
    """Whether retrieved memory is out of the prompt."""
    tokens: int = field(init=False, default=0)
    """Tokens of the prompt as it stands (tool schemas included)."""
    protected_ids: set[str] = field(init=False, default_factory=set)
    """Messages no strategy may replace in this build (see `protect`)."""
    edits_started: bool = field(init=False, default=False)
    """Whether this build passed the trigger (see `over_trigger`)."""
    reshown: dict[str, BaseMessage] = field(init=False, default_factory=dict)
    """History messages shown with other tool-call ids, by message id (`_repair_view`)."""
    resume: dict[Any, int] = field(init=False, default_factory=dict)
    """Where a strategy's scan may resume in its next attempt of this build, by the strategy's
    key (pruning: nothing before it is left to prune). Valid because edits within a build only
    take messages out of reach, never bring one back."""
    _fixed_tokens: int = field(init=False, default=0)
    _summary_tokens: int = field(init=False, default=0)
    memo: dict[Any, Any] = field(init=False, default_factory=dict)
    """What a strategy worked out from the history once per build (the history is fixed)."""
    _attempts: dict[str, int] = field(init=False, default_factory=dict)
    _empty: int = field(init=False, default=0)
    # The history is fixed once the view is set up, so its block split and user turns are
    # worked out once per build, not at each shrink (that made a first build quadratic).
    _blocks: list[Block] = field(init=False, default_factory=list)
    _block_at: dict[int, int] = field(init=False, default_factory=dict)
    _next_user: list[int] = field(init=False, default_factory=list)
    _user_inputs: list[int] | None = field(init=False, default=None)

    def window_indices(self) -> list[int]:
        """History indices in the prompt, in order (pinned task first)."""
        head = [self.pin] if self.pin is not None else []
        return head + list(range(self.start, len(self.history)))

    def window(self) -> list[BaseMessage]:
        """The history messages in the prompt, in order (the originals, not placeholders)."""
        return [self.history[i] for i in self.window_indices()]

    def window_blocks(self) -> list[Block]:
        """Blocks of the window after the pinned task, with history indices as starts."""
        first = self._block_position()  # before reading `_blocks`: it may split anew
        return self._blocks[first:]

    def _block_position(self) -> int:
        """Position in `_blocks` of the block the window starts with (splitting when needed).

        `split_blocks` reads forward only, so the split of the history from any block start
        is the tail of a split made from an earlier start: one split serves every shrink.
        """
        position = self._block_at.get(self.start)
        if position is not None:
            return position
        blocks = split_blocks(self.history[self.start :])
        self._blocks = [Block(b.kind, b.start + self.start, b.messages) for b in blocks]
        self._block_at = {b.start: k for k, b in enumerate(self._blocks)}
        next_user = [len(self._blocks)] * (len(self._blocks) + 1)
        for k in range(len(self._blocks) - 1, -1, -1):
            next_user[k] = k if self._blocks[k].kind == "user" else next_user[k + 1]
        self._next_user = next_user
        return 0

    def protected_from(self, turns: int) -> int:
        """History index from which the last `turns` user turns begin."""
        if turns <= 0:
            return len(self.history)
        if self._user_inputs is None:
            self._user_inputs = [i for i, m in enumerate(self.history) if is_user_input(m)]
        users = self._user_inputs
        if len(users) >= turns and users[-turns] >= self.start:
            return users[-turns]
        return self.start

    def is_untouched(self, message: BaseMessage) -> bool:
        """Whether `message` is shown whole: not pruned, compacted, nor protected from edits."""
        mid = message.id or ""
        tag = get_tag(message)
        return (
            mid not in self.ledger["pruned"]
            and mid not in self.ledger["compacted"]
            and mid not in self.protected_ids
            and not tag.get("pruned")
            and not tag.get("compacted")
        )

    def tool_call_of(self, index: int) -> dict[str, Any] | None:
        """The tool call the result at history `index` answers (from the AI message before)."""
        msg = self.history[index]
        call_id = getattr(msg, "tool_call_id", None)
        for i in range(index - 1, max(-1, index - 64), -1):
            prev = self.history[i]
            if isinstance(prev, AIMessage):
                for tc in prev.tool_calls:
                    if tc.get("id") == call_id:
                        return dict(tc)
                return None
        return None

    def cost(self, message: BaseMessage | None) -> int:
        """Tokens one message adds to a prompt."""
        if message is None:
            return 0
        count_message = getattr(self.counter, "count_message", None)
        if count_message is not None:  # the cached per-message count, no list bookkeeping
            return int(count_message(message))
        return checked_count(self.counter, [message]) - self._empty

    def next_attempt(self, kind: str) -> int:
        """Number the next attempt of `kind` in this build (1, 2, ...), for the report."""
        self._attempts[kind] = self._attempts.get(kind, 0) + 1
        return self._attempts[kind]

    def record(self, kind: DecisionKind, before: int, **kwargs: Any) -> Decision:
        """Record a decision of the report, ending at the current token count.

        Args:
            kind: What was done (`prune`, `compact`, `shrink`, `summarize`, `skip`, ...).
            before: Tokens before the step (read `tokens` before editing).
            **kwargs: `attempt`, `message_ids`, `detail` of the `Decision`.
        """
        return self.report.record(kind, tokens_before=before, tokens_after=self.tokens, **kwargs)
