"""The edits strategies make on a `PromptView`: `ViewEdits`.

Protect, inject, prune, compact, shorten a model turn, shrink the window, drop the pinned task,
drop and restore retrieved memory, and what an edit would cost before it is made. Every edit
keeps the view's `tokens` up to date.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from langchain_core.messages import AIMessage, BaseMessage

from langgraph_ctx.ledger.edits import record_compacted, record_pruned, set_window
from langgraph_ctx.ledger.schema import CompactedEntry, PrunedEntry
from langgraph_ctx.messages.content import text_of
from langgraph_ctx.prompt.render import (
    compacted_text,
    pruned_text,
    replace_text,
    shortened_turn,
    task_dropped_message,
    tool_of,
)
from langgraph_ctx.prompt.view_rendering import ViewRendering


class WindowMark(NamedTuple):
    """A window position (`ViewEdits.window_mark`): start, pinned task, tokens, ledger entry."""

    start: int
    pin: int | None
    tokens: int
    window: dict[str, Any]


class ViewEdits(ViewRendering):
    """The edits of a `PromptView` (see `PromptView`)."""

    def protect(self, message_ids: Iterable[str | None]) -> None:
        """Keep these messages whole in this build: no strategy prunes or compacts them.

        Protection lasts one build (a strategy that protects runs on every build), and does not
        undo an edit an earlier build made.
        """
        self.protected_ids.update(mid for mid in message_ids if mid)

    def inject(self, text: str) -> None:
        """Add a fragment to the base system prompt of this build (after the configured ones).

        Inject the same text on every build (a strategy that injects runs on every build): the
        system prompt then stays the same bytes from call to call.
        """
        old = self.cost(self.system_message())
        self.static_fragments.append(text)
        self.tokens += self.cost(self.system_message()) - old

    def prune(self, messages: Sequence[BaseMessage], refs: dict[str, str]) -> None:
        """Show tool outputs as short placeholders; `refs` maps ids to archive references.

        View-only: the state keeps every output whole. A placeholder names the reference the
        agent can `recall` when the output was archived.
        """
        for msg in messages:
            old = self.cost(msg)
            entry: PrunedEntry = {"tool": tool_of(msg), "chars": len(text_of(msg))}
            if refs:
                entry["ref"] = refs[msg.id or ""]
            record_pruned(self.ledger, msg.id or "", entry)
            self.tokens += self.cost(self.shown(msg)) - old

    def compact(
        self, index: int, ref: str, *, preview_chars: int, lines: list[int] | None = None
    ) -> None:
        """Show the tool output at history `index` as its archive reference and a preview.

        With `lines`, those whole lines of the output are shown instead of the preview (an
        excerpt, `langgraph_ctx.prompt.excerpt`).
        """
        msg = self.history[index]
        old = self.cost(self.shown(msg))
        call = self.tool_call_of(index) or {}
        text = text_of(msg)
        entry: CompactedEntry = {
            "ref": ref,
            "tool": tool_of(msg),
            "chars": len(text),
            "input": json.dumps(call.get("args", {}), sort_keys=True, ensure_ascii=False)[:300],
            "preview": text[:preview_chars],
        }
        if lines is not None:
            entry["lines"] = list(lines)
        record_compacted(self.ledger, msg.id or "", entry)
        self.tokens += self.cost(self.shown(msg)) - old

    def shorten_turn(
        self, index: int, ref: str, *, lines: list[int] | None, max_arg_chars: int
    ) -> None:
        """Show the model turn at history `index` shortened (`shortened_turn`); `ref` archives it.

        `lines`: the lines of its text kept (None: all); string tool-call arguments longer than
        `max_arg_chars` are cut (0: none).
        """
        msg = self.history[index]
        old = self.cost(self.shown(msg))
        text = text_of(msg)
        entry: CompactedEntry = {"ref": ref, "tool": "", "chars": len(text), "preview": text[:100]}
        if lines is not None:
            entry["lines"] = list(lines)
        if max_arg_chars:
            entry["max_arg"] = max_arg_chars
        record_compacted(self.ledger, msg.id or "", entry)
        self.tokens += self.cost(self.shown(msg)) - old

    def shortened_cost(
        self, message: AIMessage, lines: list[int] | None, max_arg_chars: int
    ) -> int:
        """Tokens the model turn would take shortened (nothing is changed)."""
        entry: dict[str, Any] = {"lines": lines, "max_arg": max_arg_chars}
        return self.cost(shortened_turn(message, message.id or "", entry))

    def pruned_cost(self, message: BaseMessage) -> int:
        """Tokens `message` would take as a pruned placeholder (nothing is changed)."""
        probe = {"tool": tool_of(message), "chars": len(text_of(message)), "ref": "?"}
        return self.cost(replace_text(message, pruned_text(message.id or "", probe)))

    def compacted_cost(
        self, message: BaseMessage, preview_chars: int, lines: list[int] | None = None
    ) -> int:
        """Tokens `message` would take once compacted, a little over (nothing is changed)."""
        text = text_of(message)
        entry: dict[str, Any] = {
            "tool": tool_of(message),
            "chars": len(text),
            "input": "",
            "preview": text[:preview_chars],
        }
        if lines is not None:
            entry["lines"] = lines
        stand_in = compacted_text(message.id or "", entry, text, self.search_tool)
        return self.cost(replace_text(message, stand_in)) + 40

    def shrink_recorded(self, **detail: Any) -> list[BaseMessage] | None:
        """`shrink_once`, recorded as a `shrink` decision (its messages, `detail` added)."""
        before = self.tokens
        step = self.shrink_once()
        if step is not None:
            self.record(
                "shrink",
                before,
                message_ids=[m.id or "" for m in step],
                detail={"messages": len(step), **detail},
            )
        return step

    def window_mark(self) -> WindowMark:
        """Where the window starts now, for `rewind_window`."""
        return WindowMark(self.start, self.pin, self.tokens, dict(self.ledger.get("window") or {}))

    def rewind_window(self, mark: WindowMark) -> None:
        """Show the window from `mark` again: the shrinks since then are taken back."""
        self.start, self.pin, self.tokens = mark.start, mark.pin, mark.tokens
        window = mark.window
        set_window(
            self.ledger,
            window.get("start_id"),
            pin_id=window.get("pin_id"),
            task_dropped=bool(window.get("task_dropped")),
        )

    def shrink_once(self) -> list[BaseMessage] | None:
        """Move the window start forward by one turn, or one block within the last turn.

        With two or more turns in view the oldest (possibly partial) turn goes, its pinned
        task with it. Within a single turn the oldest block goes and the turn's task message
        stays pinned in front of the window. Returns the messages that left the prompt, or
        None when only the pinned task and the newest block are left.
        """
        first = self._block_position()
        blocks = self._blocks
        later_turn = self._next_user[first + 1] if first < len(blocks) else len(blocks)
        later_turns = later_turn < len(blocks)
        new_pin: int | None
        if later_turns:
            new_start, new_pin = blocks[later_turn].start, None
        else:
            opens_turn = first < len(blocks) and blocks[first].kind == "user"
            body = first + 1 if opens_turn else first
            if len(blocks) - body <= 1:
                return None
            new_start = blocks[body + 1].start
            new_pin = blocks[first].start if opens_turn else self.pin
        head = [self.pin] if self.pin is not None else []
        dropped = [i for i in [*head, *range(self.start, new_start)] if i != new_pin]
        self.tokens -= sum(self.cost(self.shown(self.history[i])) for i in dropped)
        opener_before = self.cost(self.opener())
        note = bool((self.ledger.get("window") or {}).get("task_dropped"))
        keep_note = note and not later_turns  # still mid-turn without its task
        self.start, self.pin = new_start, new_pin
        set_window(
            self.ledger,
            self.history[self.start].id,
            pin_id=self.history[self.pin].id if self.pin is not None else None,
            task_dropped=keep_note,
        )
        self.tokens += self.cost(self.opener()) - opener_before
        return [self.history[i] for i in dropped]

    def drop_task(self) -> bool:
        """Last resort: replace the pinned task by a short note.

        Returns False (and changes nothing) when no task is pinned or the note would not be
        smaller than the task.
        """
        if self.pin is None:
            return False
        task = self.history[self.pin]
        delta = self.cost(task_dropped_message()) - self.cost(self.shown(task))
        if delta >= 0:  # the note would not save anything: keep the task
            return False
        before = self.tokens
        self.tokens += delta
        self.pin = None
        set_window(self.ledger, self.history[self.start].id, task_dropped=True)
        self.record("shrink", before, message_ids=[task.id or ""], detail={"task_dropped": True})
        return True

    def drop_memory(self) -> None:
        """Take retrieved memory out of the prompt (prompt injections and history stay)."""
        if not self.memory_items or self.memory_dropped:
            return
        before = self.tokens
        old = self.cost(self.system_message())
        self.memory_dropped = True
        self.tokens += self.cost(self.system_message()) - old
        self.record("drop_memory", before, detail={"items": len(self.memory_items)})

    def restore_memory(self) -> bool:
        """Put dropped memory back if the prompt fits the limit with it (after the edits).

        The `drop_memory` decision then says so: `restored` and the tokens it took back
        (`restored_tokens`). Returns whether it came back.
        """
        if not self.memory_dropped:
            return False
        old = self.cost(self.system_message())
        self.memory_dropped = False
        delta = self.cost(self.system_message()) - old
        if self.tokens + delta > self.budget.limit:
            self.memory_dropped = True
            return False
        self.tokens += delta
        for decision in self.report.decisions:
            if decision.kind == "drop_memory":
                decision.detail.update(restored=True, restored_tokens=delta)
        return True
