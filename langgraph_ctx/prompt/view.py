"""`PromptView`: what the model will see in one build, its token cost, and the edits on it.

A build makes one view of the thread (the base system prompt, the history window, the ledger of
earlier edits) and hands it to each strategy in turn. The view owns the window and the
rendering; it knows nothing of when or why to edit: that is each strategy's algorithm
(`langgraph_ctx.strategies`). Nothing here does I/O.

Token counts are kept incrementally (per-message costs from the cached counter); the final
prompt is counted in full once, at the end of the build.

The view's code is split by concern: its data and the reads of its window (`view_data`), the
rendering (`view_rendering`), the edits (`view_edits`); this module holds the view itself: how
a build sets it up, its goals (target, trigger) and the running summary.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage, SystemMessage

from langgraph_ctx._ids import derived_id
from langgraph_ctx.ledger.edits import record_growth, set_window
from langgraph_ctx.ledger.summary import fold_summary
from langgraph_ctx.messages.blocks import is_user_input
from langgraph_ctx.messages.content import get_tag, with_id
from langgraph_ctx.messages.repair import (
    conversation_start_message,
    needs_conversation_form,
    repair_messages,
)
from langgraph_ctx.messages.validation import check_tool_args, check_unique_ids
from langgraph_ctx.prompt.fallback import fallback_summary
from langgraph_ctx.prompt.render import still_describes
from langgraph_ctx.prompt.report import ContextCostReport
from langgraph_ctx.prompt.view_edits import ViewEdits
from langgraph_ctx.tokens.counter import checked_count


@dataclass(kw_only=True, eq=False)
class PromptView(ViewEdits):
    """The prompt of one build as strategies see it and edit it.

    Read: `tokens` (the prompt's cost now, tool schemas included), `budget`, `window()` (the
    history messages in the prompt, originals), `shown(message)` (how one appears),
    `render()` (the prompt), `cost(message)`, `ledger` (what earlier builds recorded).

    Edit: `protect`, `prune`, `compact`, `shrink_once`, `drop_task`, `drop_memory`,
    `restore_memory`, `set_summary`; every edit keeps `tokens` up to date. Record what you did
    with `record`: it becomes a decision of the `context_cost` report.

    Views are made by `ContextManager.build`; a strategy never builds one.
    """

    def __post_init__(self) -> None:
        self._empty = checked_count(self.counter, [])
        messages_in = len(self.history) + len(self.base)
        self._restore_window()
        for i in self.window_indices():  # only what the prompt shows needs an id
            self.history[i] = with_id(self.history[i], self.base_offset + i)
        shown = [self.history[i] for i in self.window_indices()]
        check_unique_ids(shown)
        check_tool_args(shown)
        repaired = self._repair_view()
        self.reconcile()
        self.tokens = self.count_full()
        # As the build found the prompt: the goals stay put while its strategies edit.
        self._fixed_tokens = self._fixed_part() if self.budget.targets_above_fixed else 0
        self._summary_tokens = self.cost(self.summary_message())
        self._learn_growth(messages_in)
        self.report = ContextCostReport(
            limit=self.budget.limit,
            tokens=self.tokens,
            tokens_in=self.tokens,
            messages_in=messages_in,
            trigger=self.trigger,
        )
        if repaired is not None or self.repairs:
            actions, ids = repaired or ([], [])
            detail: dict[str, Any] = {}
            if actions:
                detail["messages"] = actions
            if self.repairs:
                detail["ledger"] = list(self.repairs)
            self.record("repair", self.tokens, message_ids=ids, detail=detail)

    def _learn_growth(self, messages_in: int) -> None:
        """Fold what this call added to the prompt into the ledger's moving average."""
        last = self.ledger.get("last_report") or {}
        tokens, messages = last.get("tokens"), last.get("messages_in")
        if not isinstance(tokens, int) or not isinstance(messages, int):
            return
        if messages_in > messages and self.tokens > tokens:  # a new call, not a rebuild
            record_growth(self.ledger, self.tokens - tokens)

    @property
    def goal(self) -> int:
        """Tokens to cut down to once edits started (the budget's target)."""
        return self._share_goal(self.budget.target)

    @property
    def trigger(self) -> int:
        """Prompt size above which edits start in this build (`ContextBudget.cache_price`)."""
        budget = self.budget
        growth = self.ledger.get("growth")
        if budget.cache_price is None or not growth:
            return budget.trigger_tokens
        goal = self.goal
        cycle = math.sqrt(2 * growth * max(goal, 1) / budget.cache_price)
        floor = int(budget.limit * budget.trigger_floor)
        return min(budget.trigger_tokens, max(int(goal + cycle), floor))

    @property
    def summary_goal(self) -> int:
        """Tokens a summarizing window cuts down to (the budget's summary target)."""
        return min(self.goal, self._share_goal(self.budget.summary_target))

    def _share_goal(self, share: float) -> int:
        """Tokens for a share of the budget (see `ContextBudget.targets_above_fixed`).

        Never above the budget's trigger: a build that stopped over it would leave the next
        build on the same state something to edit.
        """
        if not self.budget.targets_above_fixed:
            return int(self.budget.limit * share)
        room = max(0, self.budget.limit - self._fixed_tokens)
        return min(self.budget.trigger_tokens, int(self._fixed_tokens + room * share))

    def room_share(self, share: float) -> int:
        """Tokens for a share of the room the running summary shares with the history.

        With `targets_above_fixed`, the room is what the limit leaves above the base system
        prompt, tool schemas and pinned task as the build found them (the summary is not part
        of it: it is what the share sizes); otherwise the whole limit.
        """
        if not self.budget.targets_above_fixed:
            return int(self.budget.limit * share)
        fixed = self._fixed_tokens - self._summary_tokens
        return int(max(0, self.budget.limit - fixed) * share)

    def _fixed_part(self) -> int:
        """Tokens of the base system prompt, tool schemas, summary and task in the window."""
        task = self.pin
        if task is None and self.start == 0 and self.history and is_user_input(self.history[0]):
            task = 0  # the task opens the window; a shrink would pin it
        pinned = self.cost(self.history[task]) if task is not None else 0
        head = self.cost(self.system_message()) + self.cost(self.summary_message())
        return head + pinned + self.tool_tokens

    def over_trigger(self) -> bool:
        """Whether edits are due: the prompt passed the trigger in this build.

        Sticky: once the prompt passed the trigger, edits go on down to the target even when
        an earlier strategy already brought it under the trigger (hysteresis keeps the prompt
        prefix stable for many calls between edits).
        """
        if not self.edits_started and self.tokens > self.trigger:
            self.edits_started = True
        return self.edits_started

    def tokens_with_summary(
        self, text: str, quotes: Sequence[str] | None = None, dump_ref: str | None = None
    ) -> int:
        """Prompt tokens if `text` (and `quotes`) became the running summary (no change).

        `dump_ref`: the insurance dump `set_summary` would add (the summary message names it).
        """
        saved_summary, saved_hint = self.ledger.get("summary"), self.ledger.get("hint")
        current = self.cost(self.system_message()) + self.cost(self.summary_message())
        refs = list((saved_summary or {}).get("dump_refs") or []) + ([dump_ref] if dump_ref else [])
        try:
            self.ledger["hint"] = None  # as in set_summary
            trial: Any = {**(saved_summary or {}), "text": text, "dump_refs": refs}
            if quotes is not None:
                trial["quotes"] = list(quotes)
            self.ledger["summary"] = trial
            probe = self.cost(self.system_message()) + self.cost(self.summary_message())
        finally:
            self.ledger["summary"], self.ledger["hint"] = saved_summary, saved_hint
        return self.tokens - current + probe

    def summary_limit(self, quotes: Sequence[str] | None = None) -> int:
        """The most tokens the prompt may take with the running summary as it lands.

        The trigger of this build (`trigger`): under it, the next calls do not edit again at
        once (building again on this state changes nothing). When the prompt is over the
        trigger even without a summary, the limit. Every change to the summary message in a
        build keeps to it.
        """
        if self.tokens_with_summary("", quotes) > self.trigger:
            return self.budget.limit
        return self.trigger

    def fit_summary(
        self,
        text: str,
        *,
        min_chars: int = 200,
        quotes: Sequence[str] | None = None,
        dump_ref: str | None = None,
    ) -> str | None:
        """`text`, cut down so the prompt with it as the summary keeps to `summary_limit`.

        Measured as `set_summary` will show it: with its `quotes` and its insurance dump
        `dump_ref` named. A summarizer bounds its output in characters, not in this budget's
        tokens, so a summary can outgrow a small window. Cutting drops the oldest items of
        the largest section first (deterministic). Returns None when not even `min_chars`
        would fit.
        """
        limit = self.summary_limit(quotes)
        if self.tokens_with_summary(text, quotes, dump_ref) <= limit:
            return text
        chars = len(text)
        while chars > min_chars:
            chars = max(min_chars, chars * 3 // 4)
            candidate = fallback_summary([], previous=text, max_chars=chars)
            if self.tokens_with_summary(candidate, quotes, dump_ref) <= limit:
                return candidate
        return None

    def set_summary(
        self,
        text: str,
        covered: list[BaseMessage],
        dump_ref: str | None,
        source: str,
        *,
        quotes: Sequence[str] | None = None,
    ) -> None:
        """Make `text` the running summary, covering `covered` (insured by `dump_ref`).

        `quotes` replaces the summary's quoted tool-output lines (None: they stay as they are).
        """
        old_sys, old_sum = self.cost(self.system_message()), self.cost(self.summary_message())
        where = {m.id: i for i, m in enumerate(self.history) if m.id}
        fold_summary(
            self.ledger,
            text=text,
            covered_ids=[m.id or "" for m in covered],
            dump_ref=dump_ref,
            source=source,
            position=lambda mid: where.get(mid, -1),
            quotes=quotes,
        )
        self.tokens += (
            self.cost(self.system_message()) + self.cost(self.summary_message()) - old_sys - old_sum
        )

    def _repair_view(self) -> tuple[list[str], list[str]] | None:
        """Make the shown history valid for the providers; the state keeps every message.

        Orphan tool results and second answers to one call leave the prompt, a call without an
        answer gets an error result, and calls without an id of their own are shown with one
        (`repair_messages`; such copies go to `reshown`). System and blank user
        messages inside the conversation are listed here and shown in their conversation form
        by `shown`; a conversation opening with the model gets the stand-in from `opener`.
        Deterministic, so the prompt stays the same bytes from call to call. Returns the
        actions and the ids of the messages involved, or None when the history needed nothing.
        """
        view = self.history[self.start :]
        actions: list[str] = []
        touched: list[str] = []
        result = repair_messages(view)  # the input list itself when nothing needs repair
        if result.actions:
            kept = {id(m) for m in result.messages}
            touched += [m.id or "" for m in view if id(m) not in kept]
            touched += [m.id or "" for m in result.messages if get_tag(m).get("repair")]
            # A message shown with other call ids stays the original here (archives and
            # dumps keep what the state holds); `shown` puts the copy in the prompt.
            originals = {m.id: m for m in view}
            repaired = []
            for m in result.messages:
                original = originals.get(m.id)
                if original is not None and original is not m:
                    self.reshown[m.id or ""] = m
                    m = original
                repaired.append(m)
            self.history[self.start :] = repaired
            actions += result.actions
        for i in self.window_indices():  # shown differently, kept whole in state
            message = self.history[i]
            if needs_conversation_form(message):
                what = "system message" if isinstance(message, SystemMessage) else "empty message"
                actions.append(f"showed {what} {message.id} as a user message")
                touched.append(message.id or "")
        if self.opens_with_stand_in():
            actions.append("opened the conversation with a user stand-in")
            touched.append(conversation_start_message().id or "")
        return (actions, touched) if actions else None

    def _restore_window(self) -> None:
        window = self.ledger.get("window") or {}
        start_id, pin_id = window.get("start_id"), window.get("pin_id")
        if not start_id:
            return
        for i in range(len(self.history) - 1, -1, -1):  # the window is near the end
            if self._id_at(i) == start_id:
                self.start = i
                break
        else:  # the message left the state: show everything and let the budget decide again
            set_window(self.ledger)
            return
        if pin_id:
            for i in range(self.start - 1, -1, -1):
                if self._id_at(i) == pin_id:
                    self.pin = i
                    break

    def _id_at(self, index: int) -> str:
        message = self.history[index]
        return message.id or derived_id(message, self.base_offset + index)

    def reconcile(self) -> None:
        """Keep ledger entries only for messages in view whose text is still what was replaced.

        Entries describe the content they replaced. After a user edit (`update_state` with the
        same id), a removal or a fork, a stale entry would show a placeholder of text that no
        longer exists; entries of messages that left the view are done with (the archive's
        index still maps their ids to references). This also keeps the ledger as small as the
        window.
        """
        in_view = {self.history[i].id: self.history[i] for i in self.window_indices()}
        for key in ("pruned", "compacted"):
            entries: dict[str, Any] = self.ledger[key]  # type: ignore[literal-required]
            kept = {
                mid: entry
                for mid, entry in entries.items()
                if mid in in_view and still_describes(entry, in_view[mid])
            }
            if len(kept) != len(entries):
                self.ledger[key] = kept  # type: ignore[literal-required]
