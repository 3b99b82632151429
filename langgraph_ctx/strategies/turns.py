"""Shortening old model turns: long reasoning keeps its first and last lines, long arguments cut."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from langchain_core.messages import AIMessage

from langgraph_ctx._effects import Plan
from langgraph_ctx.messages.content import text_of
from langgraph_ctx.strategies.base import archive_or_skip, check_field_types

if TYPE_CHECKING:
    from langgraph_ctx.prompt.view import PromptView


@dataclass(frozen=True, kw_only=True, slots=True)
class ShortenTurns:
    """Over the trigger, old model turns are shown shortened, oldest first, to the target.

    In long agent runs the model's own turns (reasoning, commands, file contents it writes)
    are a large share of the history. An old turn keeps its first `head_lines` and last
    `tail_lines` lines (what it set out to do, the action it took) and string tool-call
    arguments over `max_arg_chars` are cut; the calls keep their ids, so their results still
    answer them. The original goes to the archive first (lossless: `recall` reads it back by
    the message id). Needs an archive (without one it does nothing). Left whole: turns that
    call no tool (they answer the user: the conversation itself) and turns with content
    blocks (not plain text).
    """

    keep_last: int = 2
    """How many of the newest model turns always stay whole."""
    head_lines: int = 2
    """Lines kept from the start of a shortened turn's text."""
    tail_lines: int = 2
    """Lines kept from the end of a shortened turn's text."""
    max_arg_chars: int = 300
    """String tool-call arguments longer than this are cut to it (0: arguments stay whole)."""
    min_chars: int = 400
    """Turns whose text and arguments are shorter than this are left whole."""
    settle_after: int | None = None
    """A turn is shortened once this many model turns came after it, whatever the prompt's size
    (None: only over the trigger). The edit sits at the end of the prompt, so the cached prefix
    before it stays as it was."""

    def __post_init__(self) -> None:
        check_field_types(self)  # every count and size >= 0

    def apply(self, view: PromptView) -> Plan[None]:
        """Shorten old turns when edits are due and the prompt is still over the target."""
        archive = view.resources.archive_messages
        if archive is None:
            return
        due = view.over_trigger() and view.tokens > view.goal
        picked = self._pick(view, settled_only=not due)
        if not picked:
            return
        before = view.tokens
        refs = yield from archive_or_skip(view, picked, "shorten turns")
        if refs is None:
            return
        ids = [view.history[i].id or "" for i in picked]
        for i, mid in zip(picked, ids, strict=True):
            view.shorten_turn(
                i, refs[mid], lines=self._lines(view, i), max_arg_chars=self.max_arg_chars
            )
        view.record("compact", before, message_ids=ids, detail={"model_turns": len(ids)})

    def _lines(self, view: PromptView, i: int) -> list[int]:
        lines = text_of(view.history[i]).splitlines()
        n = len(lines)
        return sorted(
            set(range(min(self.head_lines, n))) | set(range(max(0, n - self.tail_lines), n))
        )

    def _pick(self, view: PromptView, *, settled_only: bool) -> list[int]:
        """Turns to shorten, oldest first, until the estimated prompt reaches the target.

        `settled_only`: only the turns `settle_after` newer turns have followed (all of them).
        """
        turns = [i for i in view.window_indices() if isinstance(view.history[i], AIMessage)]
        if settled_only:
            if self.settle_after is None:
                return []
            keep = max(self.keep_last, self.settle_after)
        else:
            keep = self.keep_last
        candidates = turns[: max(0, len(turns) - keep)]
        picked: list[int] = []
        saved = 0
        for i in candidates:
            msg = view.history[i]
            assert isinstance(msg, AIMessage)
            if not msg.tool_calls or not isinstance(msg.content, str) or not view.is_untouched(msg):
                continue
            size = len(msg.content) + sum(len(str(c.get("args", ""))) for c in msg.tool_calls)
            if size < self.min_chars:
                continue
            gain = view.cost(msg) - view.shortened_cost(
                msg, self._lines(view, i), self.max_arg_chars
            )
            if gain <= 0:
                continue
            picked.append(i)
            saved += gain
            if not settled_only and view.tokens - saved <= view.goal:
                break
        return picked
