"""Tool-output pruning and dropping retrieved memory: the cheapest edits, tried first."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage

from langgraph_ctx._effects import Plan
from langgraph_ctx.messages.content import is_error_result, is_tool_output, text_of
from langgraph_ctx.strategies.base import check_field_types

if TYPE_CHECKING:
    from langgraph_ctx.prompt.view import PromptView


@dataclass(frozen=True, kw_only=True, slots=True)
class DropMemory:
    """Over the limit, retrieved memory leaves the prompt first (prompt injections stay).

    Memory outranks recent history: when the strategies after this one made room, the build
    puts the memory back and lets those strategies cut the history instead (the report's
    `drop_memory` decision then says `restored`).
    """

    def apply(self, view: PromptView) -> None:
        """Drop retrieved memory when the prompt is over the limit."""
        if view.tokens > view.budget.limit:
            view.drop_memory()


@dataclass(frozen=True, kw_only=True, slots=True)
class PruneToolOutputs:
    """Over the trigger, old tool outputs become short placeholders, oldest first, to the target.

    View-only: the state keeps every output whole, and with an archive the placeholder names a
    reference the agent can `recall`. Each run is one numbered attempt in the report (the
    window runs it again after each shrink).
    """

    protect_turns: int = 2
    """The last N user turns are left alone."""
    prune_errors: bool = False
    """Also prune error results (kept by default: the agent learns from them)."""
    min_chars: int = 200
    """Outputs shorter than this are not worth a placeholder."""

    def __post_init__(self) -> None:
        check_field_types(self)  # protect_turns and min_chars >= 0

    def apply(self, view: PromptView) -> Plan[None]:
        """One pruning attempt, when edits are due."""
        if not view.over_trigger():
            return
        attempt = view.next_attempt("prune")
        if view.tokens <= view.goal:
            return
        before = view.tokens
        picked = self._pick(view)
        if not picked:  # each attempt is a decision, also when nothing was left to prune
            view.record("prune", before, attempt=attempt, detail={"pruned": 0})
            return
        detail: dict[str, Any] = {"protected_turns": self.protect_turns}
        refs: dict[str, str] = {}
        archive = view.resources.archive_messages
        if archive is not None:
            try:
                refs = yield from archive(picked)
            except Exception as exc:  # pruning is view-only: the outputs stay whole in state
                refs = {}
                detail["archive_error"] = f"{type(exc).__name__}: {exc}"
        view.prune(picked, refs)
        view.record(
            "prune",
            before,
            attempt=attempt,
            message_ids=[m.id or "" for m in picked],
            detail=detail,
        )

    def _pick(self, view: PromptView) -> list[BaseMessage]:
        """Outputs to prune, oldest first, until the estimated prompt reaches the target."""
        stop = view.protected_from(self.protect_turns)
        picked: list[BaseMessage] = []
        saved = 0
        # What an earlier attempt of this build passed over stays out of reach (it was not
        # worth pruning, or is pruned now): the window re-runs pruning after every shrink, and
        # rescanning the window each time made a first build on a long history quadratic.
        scanned = max(view.start, view.resume.get(self, view.start))
        for i in range(scanned, stop):
            scanned = i + 1
            msg = view.history[i]
            if not is_tool_output(msg) or not view.is_untouched(msg):
                continue
            if is_error_result(msg) and not self.prune_errors:
                continue
            if len(text_of(msg)) < self.min_chars:
                continue
            picked.append(msg)
            saved += view.cost(msg) - view.pruned_cost(msg)
            if view.tokens - saved <= view.goal:
                break
        view.resume[self] = scanned
        return picked
