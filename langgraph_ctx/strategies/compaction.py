"""Compaction: large tool outputs go to the archive and leave a reference and a preview."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage, BaseMessage

from langgraph_ctx._effects import Plan
from langgraph_ctx.checks import check_number
from langgraph_ctx.messages.content import is_error_result, is_recalled, is_tool_output, text_of
from langgraph_ctx.prompt.excerpt import LaterUse, excerpt_lines, salient_names
from langgraph_ctx.prompt.render import tool_of
from langgraph_ctx.strategies.base import archive_or_skip, check_field_types

if TYPE_CHECKING:
    from langgraph_ctx.prompt.view import PromptView


@dataclass(frozen=True, kw_only=True, slots=True)
class Compaction:
    """Externalize large tool outputs to the archive: lossless, restorable by `recall`.

    Over the trigger, oldest first, down to the target; the newest `keep_last` tool results
    stay whole unless they alone do not fit: when even the smallest prompt the sliding window
    could leave (the pinned task and the newest block) is over the limit, the newest outputs
    are compacted too, largest first, down to the target, rather than failing the call. That
    second pass ignores `keep_last`, `keep_errors` and `min_chars` (an output that cannot be
    shown whole is better shown as its reference than not at all) but still honours
    `include_tools` and `exclude_tools`. Needs an archive (without one it does nothing).
    """

    min_chars: int = 2_000
    """Tool outputs at least this long may be compacted."""
    keep_last: int = 3
    """How many of the newest tool results always stay whole."""
    keep_errors: bool = True
    """Leave error results whole."""
    include_tools: tuple[str, ...] | None = None
    """Only compact these tools (None: all)."""
    exclude_tools: tuple[str, ...] = ()
    """Never compact these tools."""
    preview_chars: int = 100
    """Characters of the output kept as a preview."""
    on_arrival: float | None = None
    """Tool outputs larger than this share of the limit are compacted in the first build that
    sees them, whatever the prompt's size: the model gets the reference and the preview
    instead of paying for the whole output in every call until the trigger (`None`: only over
    the trigger). `default_strategies()` sets 0.1, as deepagents evicts a result over a tenth
    of its window. `keep_errors`, `include_tools` and `exclude_tools` apply; `keep_last` does
    not (the newest output is the one arriving)."""
    arrival_min_tokens: int = 2_000
    """Outputs under this many tokens are never compacted on arrival (in a small window a
    preview saves little and the model would recall what it needs)."""
    arrival_read_once: bool = False
    """With `on_arrival`: an output no model message has answered yet is shown whole to that
    one call when the prompt with it stays under the trigger, and excerpted in the next build,
    its kept lines chosen knowing what the answer used (`excerpt`). The agent's next step
    mostly quotes the output it just read; an excerpt made before it did can only guess which
    lines it will quote. Over the trigger the output is compacted as it arrives."""
    excerpt: bool = False
    """Show whole lines instead of the character preview: the first and last two, and every
    line carrying a name (path, identifier, id, number) that a later model message used, up to
    `excerpt_chars` and a third of the output (`langgraph_ctx.prompt.excerpt`). The agent keeps what
    it was working with; the rest is one `recall` away."""
    excerpt_chars: int = 1_500
    """At most this many characters of used lines in an excerpt."""
    arrival_news: bool = False
    """With `excerpt`: an output excerpted before any model message answered it (as it
    arrives) fills the room its used lines leave, up to `excerpt_chars` and no further than
    the size at which an output is excerpted on arrival, with the lines that carry names no
    earlier message showed, most such names first. Nothing is known yet of what the agent
    will use from it; what it has not seen elsewhere is what the output tells it. The excerpt
    is larger, and its lines are paid in every call until the next summary.
    `default_strategies()` sets it."""
    keep_share: float = 0.0
    """Besides the newest `keep_last`, the newest outputs within this share of the limit stay
    whole (the outputs of the newest tool-call batch always do)."""

    def __post_init__(self) -> None:
        check_field_types(self)  # and every count (min_chars, keep_last...) >= 0
        share = "a share of the limit"
        check_number(
            "on_arrival", self.on_arrival, gt=0, le=1, optional=True, example=0.1, note=share
        )
        check_number("keep_share", self.keep_share, ge=0, le=1, example=0.05, note=share)

    def apply(self, view: PromptView) -> Plan[None]:
        """Compact until at or under the target."""
        if view.resources.archive_messages is None:
            return
        arriving = self._pick_arriving(view)
        if arriving and not (yield from self._compact(view, arriving, {"arrival": True})):
            return
        if not view.over_trigger() or view.tokens <= view.goal:
            return
        picked = self._pick(view)
        if picked and not (yield from self._compact(view, picked, {})):
            return
        oversized = self._pick_oversized(view)
        if oversized:
            yield from self._compact(view, oversized, {"oversized": True})

    def _compact(
        self,
        view: PromptView,
        picked: list[int],
        detail: dict[str, Any],
    ) -> Plan[bool]:
        """Archive and compact the outputs at `picked`; False when the archive write failed."""
        before = view.tokens
        refs = yield from archive_or_skip(view, picked, "compaction")
        if refs is None:
            return False
        ids = [view.history[i].id or "" for i in picked]
        for i in picked:
            ref = refs[view.history[i].id or ""]
            view.compact(i, ref, preview_chars=self.preview_chars, lines=self._lines(view, i))
        detail = {"refs": [refs[i] for i in ids], **detail}
        view.record("compact", before, message_ids=ids, detail=detail)
        return True

    def _eligible(self, view: PromptView, i: int) -> bool:
        msg = view.history[i]
        tool = tool_of(msg)
        return (
            is_tool_output(msg)
            and view.is_untouched(msg)
            and not (self.keep_errors and is_error_result(msg))
            and tool not in self.exclude_tools
            and (self.include_tools is None or tool in self.include_tools)
        )

    def _pick_arriving(self, view: PromptView) -> list[int]:
        """Window outputs over the `on_arrival` share of the limit, whatever the prompt's size."""
        if self.on_arrival is None:
            return []
        bound = self._arrival_bound(view)
        # Outputs from `read` on have not been read by the model (no model message follows).
        read = len(view.history)
        if self.arrival_read_once and view.tokens <= view.trigger:
            read = _after_last_model_message(view.history)
        return [
            i
            for i in view.window_indices()
            if i < read
            and self._eligible(view, i)
            and not is_recalled(view.history[i])  # the agent asked for it whole
            and len(text_of(view.history[i])) >= self.min_chars
            and view.cost(view.history[i]) > bound
            and self._compacted_cost(view, i) < view.cost(view.history[i])
        ]

    def _arrival_bound(self, view: PromptView) -> float:
        """Tokens over which an output is excerpted as it arrives (`on_arrival`)."""
        return max((self.on_arrival or 0) * view.budget.limit, self.arrival_min_tokens)

    def _lines(self, view: PromptView, i: int) -> list[int] | None:
        """The excerpt's lines of the output at history `i` (None: the character preview)."""
        if not self.excerpt:
            return None
        key = ("excerpt", i, self.excerpt_chars)  # priced when picked, then shown: once
        if key in view.memo:
            return list(view.memo[key])
        later = view.memo.get(LaterUse)
        if later is None:
            later = view.memo[LaterUse] = LaterUse.of(view.history, view.start)
        text = text_of(view.history[i])
        budget = min(self.excerpt_chars, len(text) // 3)
        # `arrival_news`: an output no model message answered yet also shows its new names.
        news = self.arrival_news and i > later.newest
        seen = _names_before(view.history[:i]) if news else None
        if news:
            # Its lines keep the excerpt under the size at which an output is excerpted on
            # arrival (in this output's characters per token): in a small window they would
            # otherwise take the room the next summary needs.
            chars_per_token = len(text) / max(1, view.cost(view.history[i]))
            budget = min(budget, int(self._arrival_bound(view) * chars_per_token))
        lines = excerpt_lines(text, index=i, later=later, max_chars=budget, seen=seen)
        view.memo[key] = lines
        return list(lines)

    def _compacted_cost(self, view: PromptView, i: int) -> int:
        msg = view.history[i]
        return view.compacted_cost(msg, self.preview_chars, self._lines(view, i))

    def _newest(self, view: PromptView, positions: list[int]) -> set[int]:
        """Outputs that stay whole: the newest batch's, the newest `keep_last`, `keep_share`."""
        newest = set(positions[-self.keep_last :]) if self.keep_last > 0 else set()
        blocks = view.window_blocks()
        if blocks:
            last = blocks[-1]
            newest.update(i for i in positions if i >= last.start)
        room = self.keep_share * view.budget.limit
        for i in reversed(positions):
            room -= view.cost(view.history[i])
            if room < 0:
                break
            newest.add(i)
        return newest

    def _pick(self, view: PromptView) -> list[int]:
        """History indices to compact, oldest first, until the estimate reaches the target."""
        positions = [i for i in view.window_indices() if is_tool_output(view.history[i])]
        newest = self._newest(view, positions)
        picked: list[int] = []
        saved = 0
        for i in positions:
            msg = view.history[i]
            tool = tool_of(msg)
            if i in newest or not view.is_untouched(msg) or len(text_of(msg)) < self.min_chars:
                continue
            if (self.keep_errors and is_error_result(msg)) or tool in self.exclude_tools:
                continue
            if self.include_tools is not None and tool not in self.include_tools:
                continue
            gain = view.cost(msg) - self._compacted_cost(view, i)
            if gain <= 0:
                continue
            picked.append(i)
            saved += gain
            if view.tokens - saved <= view.goal:
                break
        return picked

    def _pick_oversized(self, view: PromptView) -> list[int]:
        """Newest outputs to compact, largest first, when they alone do not fit the limit.

        The floor is the prompt without what the sliding window could still remove: every
        window message before the newest block (the pinned task gives way to a short note
        too). Without a `SlidingWindow` in the build's list nothing can leave, so the floor
        is the whole prompt and every output in the window is a candidate.
        """
        from langgraph_ctx.strategies.window import SlidingWindow  # window imports pruning

        blocks = view.window_blocks()
        if not blocks:
            return []
        if any(isinstance(s, SlidingWindow) for s in view.strategies):
            last = blocks[-1]
            kept = range(last.start, last.start + len(last.messages))
        else:
            kept = range(view.start, len(view.history))
        removable = [i for i in view.window_indices() if i not in kept]
        floor = view.tokens - sum(view.cost(view.shown(view.history[i])) for i in removable)
        if floor <= view.budget.limit:
            return []
        candidates = [
            i
            for i in kept
            if is_tool_output(view.history[i])
            and view.is_untouched(view.history[i])
            and tool_of(view.history[i]) not in self.exclude_tools
            and (self.include_tools is None or tool_of(view.history[i]) in self.include_tools)
        ]
        candidates.sort(key=lambda i: view.cost(view.history[i]), reverse=True)
        picked: list[int] = []
        for i in candidates:
            msg = view.history[i]
            picked.append(i)
            floor -= view.cost(msg) - self._compacted_cost(view, i)
            if floor <= view.goal:
                break
        return sorted(picked)


def _names_before(history: Sequence[BaseMessage]) -> set[str]:
    """Every name `history` showed: its texts and its model messages' tool-call arguments."""
    seen: set[str] = set()
    for message in history:
        seen |= salient_names(text_of(message))
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                seen |= salient_names(str(call.get("args", "")))
    return seen


def _after_last_model_message(history: Sequence[BaseMessage]) -> int:
    """The index after the newest model message of `history` (0: none)."""
    for i in range(len(history) - 1, -1, -1):
        if isinstance(history[i], AIMessage):
            return i + 1
    return 0
