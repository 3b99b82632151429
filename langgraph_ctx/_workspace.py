"""The working copy of one build: the prompt view, its token count, and the edits on it.

Pure except for the effects it yields. Token counts are kept incrementally (per-message costs
from the cached counter), and the final prompt is counted in full once at the end.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from langgraph_ctx._assembly import merge_system, render_entities, render_memory
from langgraph_ctx._effects import Effect, Plan
from langgraph_ctx._render import (
    RenderCache,
    compacted_text,
    pruned_text,
    replace_text,
    still_describes,
    summary_message_for,
    task_dropped_message,
    tool_of,
)
from langgraph_ctx.ledger import ContextLedger, PrunedEntry
from langgraph_ctx.messages import (
    Block,
    check_unique_ids,
    conversation_start_message,
    derived_id,
    get_tag,
    in_conversation_form,
    is_error_result,
    is_tool_output,
    needs_conversation_form,
    needs_repair,
    repair_messages,
    split_blocks,
    text_of,
    with_id,
)
from langgraph_ctx.report import ContextBudget, ContextCostReport, Decision
from langgraph_ctx.tokens import TokenCounter

SummaryPlacement = Literal["separate", "merged"]


@dataclass(kw_only=True)
class Resources:
    """What a build may use for I/O, as effect factories (None when not configured)."""

    archive_messages: Callable[[list[BaseMessage]], Effect] | None = None
    """Write messages one by one, index them by id; the effect returns their refs."""
    dump_messages: Callable[[list[BaseMessage]], Effect] | None = None
    """Write a list as one insurance dump; the effect returns its ref."""
    summarize: Callable[[list[BaseMessage], str | None], Effect] | None = None
    """Summarize messages, folding a previous summary; returns a `SummaryOutcome`."""
    extract: Callable[[list[BaseMessage], dict[str, Any] | None], Effect] | None = None
    """Update entity state from recent messages; returns the new values."""


@dataclass(kw_only=True)
class Workspace:
    """Mutable state of one build. Strategies read and edit it through its methods."""

    history: list[BaseMessage]
    base: list[BaseMessage]
    base_offset: int = 0
    """Position of `history[0]` in the list the build was given (for derived ids)."""
    render_cache: RenderCache = field(default_factory=lambda: RenderCache())
    """Messages this pipeline rendered before, reused so that equal messages are the same
    objects from call to call (the token counter then skips them by identity)."""
    ledger: ContextLedger
    budget: ContextBudget
    counter: TokenCounter
    tool_tokens: int
    static_fragments: list[str]
    memory_items: list[str]
    resources: Resources
    summary_placement: SummaryPlacement = "separate"
    auto_compact: bool = False
    protect_turns: int = 2
    prune_errors: bool = False
    min_prune_chars: int = 200
    report: ContextCostReport = field(init=False)
    start: int = field(init=False, default=0)
    pin: int | None = field(init=False, default=None)
    memory_dropped: bool = field(init=False, default=False)
    tokens: int = field(init=False, default=0)
    prune_attempts: int = field(init=False, default=0)
    _empty: int = field(init=False, default=0)

    repairs: list[str] = field(default_factory=list)
    """Ledger parts left out on load (`repair_ledger`); reported as a `repair` decision."""

    def __post_init__(self) -> None:
        self._empty = self.counter([])
        messages_in = len(self.history) + len(self.base)
        self._restore_window()
        for i in self.window_indices():  # only what the prompt shows needs an id
            self.history[i] = with_id(self.history[i], self.base_offset + i)
        check_unique_ids([self.history[i] for i in self.window_indices()])
        repaired = self._repair_view()
        self.reconcile()
        self.tokens = self.count_full()
        self.report = ContextCostReport(
            limit=self.budget.limit,
            tokens=self.tokens,
            tokens_in=self.tokens,
            messages_in=messages_in,
        )
        if repaired is not None or self.repairs:
            actions, ids = repaired or ([], [])
            detail: dict[str, Any] = {}
            if actions:
                detail["messages"] = actions
            if self.repairs:
                detail["ledger"] = list(self.repairs)
            self.decide("repair", self.tokens, message_ids=ids, detail=detail)

    def _repair_view(self) -> tuple[list[str], list[str]] | None:
        """Make the shown history valid for the providers; the state keeps every message.

        Orphan tool results and second answers to one call leave the prompt, and a call
        without an answer gets an error result (`repair_messages`). System and empty user
        messages inside the conversation are listed here and shown in their conversation form
        by `shown`; a conversation opening with the model gets the stand-in from `opener`.
        Deterministic, so the prompt stays the same bytes from call to call. Returns the
        actions and the ids of the messages involved, or None when the history needed nothing.
        """
        view = self.history[self.start :]
        actions: list[str] = []
        touched: list[str] = []
        if needs_repair(view):
            result = repair_messages(view)
            kept = {id(m) for m in result.messages}
            touched += [m.id or "" for m in view if id(m) not in kept]
            touched += [m.id or "" for m in result.messages if get_tag(m).get("repair")]
            self.history[self.start :] = result.messages
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

    def opens_with_stand_in(self) -> bool:
        """Whether the prompt needs a user stand-in: its conversation opens with no user message."""
        if self.pin is not None or (self.ledger.get("window") or {}).get("task_dropped"):
            return False
        first = self.history[self.start] if self.start < len(self.history) else None
        return first is not None and not isinstance(self.shown(first), HumanMessage)

    def opener(self) -> HumanMessage | None:
        """The user stand-in that opens the shown conversation, when it needs one.

        The note for a task too large to keep, or the stand-in before a conversation that
        starts with the model. Window moves account for it appearing and going.
        """
        if self.pin is None and (self.ledger.get("window") or {}).get("task_dropped"):
            return task_dropped_message()
        return conversation_start_message() if self.opens_with_stand_in() else None

    # --- the view -------------------------------------------------------------------------

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
            self.ledger["window"] = {}
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

    @property
    def goal(self) -> int:
        """Tokens to cut down to once edits started."""
        return self.budget.target_tokens

    def system_message(self) -> SystemMessage | None:
        """The one base system message, with every fragment in its stable position."""
        fragments = list(self.static_fragments)
        entities = (self.ledger.get("entities") or {}).get("values")
        if entities:
            fragments.append(render_entities(entities))
        hint = self.ledger.get("hint")
        if hint and hint.get("text"):
            fragments.append(hint["text"])
        summary = self.ledger.get("summary")
        if summary and summary.get("text") and self.summary_placement == "merged" and not hint:
            fragments.append(f"<summary>\n{summary['text']}\n</summary>")
        if self.memory_items and not self.memory_dropped:
            fragments.append(render_memory(self.memory_items))
        key = ("system", tuple((m.id, text_of(m)) for m in self.base), tuple(fragments))
        system: SystemMessage | None = self.render_cache.get(
            key, lambda: merge_system(self.base, fragments)
        )
        return system

    def summary_message(self) -> SystemMessage | None:
        """The running summary as its own system message (separate placement)."""
        summary = self.ledger.get("summary")
        if not summary or not summary.get("text") or self.summary_placement != "separate":
            return None
        if (self.ledger.get("hint") or {}).get("text"):
            return None  # the compression hint carries the summary
        text = summary["text"]
        covered = len(summary.get("covered_ids", []))
        refs = tuple(summary.get("dump_refs", []))
        message: SystemMessage = self.render_cache.get(
            ("summary", text, covered, refs), lambda: summary_message_for(text, covered, refs)
        )
        return message

    def shown(self, message: BaseMessage) -> BaseMessage:
        """How a history message appears in the prompt.

        A placeholder when pruned or compacted; a system or empty user message inside the
        conversation in the form every provider accepts (`in_conversation_form`).
        """
        mid = message.id or ""
        compacted = self.ledger["compacted"].get(mid)
        pruned = self.ledger["pruned"].get(mid)
        shown = message
        if compacted is not None:
            shown = self.render_cache.placeholder(
                ("compacted", mid),
                compacted,
                lambda: replace_text(message, compacted_text(compacted), compacted=True),
            )
        elif pruned is not None:
            shown = self.render_cache.placeholder(
                ("pruned", mid),
                pruned,
                lambda: replace_text(message, pruned_text(mid, pruned), pruned=True),
            )
        if not needs_conversation_form(shown):
            return shown
        converted: BaseMessage = self.render_cache.get(
            ("conversation_form", mid, shown.type, text_of(shown)),
            lambda: in_conversation_form(shown),
        )
        return converted

    def window_indices(self) -> list[int]:
        """History indices in the prompt, in order (pinned task first)."""
        head = [self.pin] if self.pin is not None else []
        return head + list(range(self.start, len(self.history)))

    def render(self) -> list[BaseMessage]:
        """The prompt as it stands."""
        out: list[BaseMessage] = []
        system = self.system_message()
        if system is not None:
            out.append(system)
        summary = self.summary_message()
        if summary is not None:
            out.append(summary)
        opener = self.opener()
        if opener is not None:
            out.append(opener)
        out.extend(self.shown(self.history[i]) for i in self.window_indices())
        return out

    def cost(self, message: BaseMessage | None) -> int:
        """Tokens one message adds to a prompt."""
        if message is None:
            return 0
        count_message = getattr(self.counter, "count_message", None)
        if count_message is not None:  # the cached per-message count, no list bookkeeping
            return int(count_message(message))
        return self.counter([message]) - self._empty

    def count_full(self) -> int:
        """Exact count of the rendered prompt, tool schemas included."""
        return self.counter(self.render()) + self.tool_tokens

    def decide(self, kind: Any, before: int, **kwargs: Any) -> Decision:
        """Record a decision ending at the current token count."""
        return self.report.add(
            Decision(kind=kind, tokens_before=before, tokens_after=self.tokens, **kwargs)
        )

    # --- stage 1: memory -----------------------------------------------------------------

    def drop_memory(self) -> None:
        """Drop retrieved memory from the prompt (prompt injections and history stay)."""
        if not self.memory_items or self.memory_dropped:
            return
        before = self.tokens
        old = self.cost(self.system_message())
        self.memory_dropped = True
        self.tokens += self.cost(self.system_message()) - old
        self.decide("drop_memory", before, detail={"items": len(self.memory_items)})

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

    # --- stage 2: pruning ----------------------------------------------------------------

    def protected_from(self, turns: int) -> int:
        """History index from which the last `turns` user turns begin."""
        if turns <= 0:
            return len(self.history)
        seen = 0
        for i in range(len(self.history) - 1, self.start - 1, -1):
            if isinstance(self.history[i], HumanMessage):
                seen += 1
                if seen == turns:
                    return i
        return self.start

    def _untouched(self, message: BaseMessage) -> bool:
        mid = message.id or ""
        tag = get_tag(message)
        return (
            mid not in self.ledger["pruned"]
            and mid not in self.ledger["compacted"]
            and not tag.get("pruned")
            and not tag.get("compacted")
        )

    def prune(self) -> Plan[None]:
        """One pruning attempt: old tool outputs to placeholders, oldest first, down to goal."""
        self.prune_attempts += 1
        attempt = self.prune_attempts
        if self.tokens <= self.goal:
            return
        before = self.tokens
        stop = self.protected_from(self.protect_turns)
        picked: list[BaseMessage] = []
        saved = 0
        for i in range(self.start, stop):
            msg = self.history[i]
            if not is_tool_output(msg) or not self._untouched(msg):
                continue
            if is_error_result(msg) and not self.prune_errors:
                continue
            if len(text_of(msg)) < self.min_prune_chars:
                continue
            picked.append(msg)
            probe = {"tool": tool_of(msg), "chars": len(text_of(msg)), "ref": "?"}
            saved += self.cost(msg) - self.cost(replace_text(msg, pruned_text(msg.id or "", probe)))
            if self.tokens - saved <= self.goal:
                break
        if not picked:  # each attempt is a decision, also when nothing was left to prune
            self.decide("prune", before, attempt=attempt, detail={"pruned": 0})
            return
        detail: dict[str, Any] = {"protected_turns": self.protect_turns}
        try:
            refs = yield from self._archive(picked)
        except Exception as exc:  # pruning is view-only: the outputs stay whole in state
            refs = {}
            detail["archive_error"] = f"{type(exc).__name__}: {exc}"
        for msg in picked:
            old = self.cost(msg)
            entry: PrunedEntry = {"tool": tool_of(msg), "chars": len(text_of(msg))}
            if refs:
                entry["ref"] = refs[msg.id or ""]
            self.ledger["pruned"][msg.id or ""] = entry
            self.tokens += self.cost(self.shown(msg)) - old
        self.decide(
            "prune",
            before,
            attempt=attempt,
            message_ids=[m.id or "" for m in picked],
            detail=detail,
        )

    def _archive(self, messages: list[BaseMessage]) -> Plan[dict[str, str]]:
        if self.resources.archive_messages is None:
            return {}
        refs = yield self.resources.archive_messages(messages)
        return dict(refs)

    # --- stage 3: compaction -------------------------------------------------------------

    def tool_call_of(self, index: int) -> dict[str, Any] | None:
        """The tool call a tool result at `index` answers (searching back to its AI message)."""
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

    def compact(
        self,
        *,
        min_chars: int,
        keep_last: int,
        keep_errors: bool,
        include: Sequence[str] | None,
        exclude: Sequence[str],
        preview_chars: int,
    ) -> Plan[None]:
        """Externalize large tool outputs to the archive, oldest first, down to goal."""
        if self.tokens <= self.goal or self.resources.archive_messages is None:
            return
        tool_positions = [i for i in self.window_indices() if is_tool_output(self.history[i])]
        newest = set(tool_positions[-keep_last:]) if keep_last > 0 else set()
        picked: list[int] = []
        saved = 0
        for i in tool_positions:
            msg = self.history[i]
            tool = tool_of(msg)
            if i in newest or not self._untouched(msg) or len(text_of(msg)) < min_chars:
                continue
            if (keep_errors and is_error_result(msg)) or tool in exclude:
                continue
            if include is not None and tool not in include:
                continue
            picked.append(i)
            saved += self.cost(msg) - _estimate_compacted(self, msg, preview_chars)
            if self.tokens - saved <= self.goal:
                break
        if not picked:
            return
        before = self.tokens
        try:
            refs = yield from self._archive([self.history[i] for i in picked])
        except Exception as exc:  # nothing is compacted without its archive copy
            self.decide(
                "skip",
                before,
                message_ids=[self.history[i].id or "" for i in picked],
                detail={"reason": f"compaction: archive write failed: {type(exc).__name__}: {exc}"},
            )
            return
        for i in picked:
            msg = self.history[i]
            old = self.cost(self.shown(msg))
            call = self.tool_call_of(i) or {}
            text = text_of(msg)
            self.ledger["compacted"][msg.id or ""] = {
                "ref": refs[msg.id or ""],
                "tool": tool_of(msg),
                "chars": len(text),
                "input": json.dumps(call.get("args", {}), sort_keys=True, ensure_ascii=False)[:300],
                "preview": text[:preview_chars],
            }
            self.ledger["pruned"].pop(msg.id or "", None)
            self.tokens += self.cost(self.shown(msg)) - old
        self.decide(
            "compact",
            before,
            message_ids=[self.history[i].id or "" for i in picked],
            detail={"refs": [refs[self.history[i].id or ""] for i in picked]},
        )

    # --- stage 4: the window -------------------------------------------------------------

    def window_blocks(self) -> list[Block]:
        """Blocks of the window after the pinned task, with absolute start indices."""
        blocks = split_blocks(self.history[self.start :])
        return [Block(b.kind, b.start + self.start, b.messages) for b in blocks]

    def shrink_once(self) -> list[BaseMessage] | None:
        """Move the window start forward by one turn, or one block within the last turn.

        With two or more turns in view the oldest (possibly partial) turn goes, its pinned
        task with it. Within a single turn the oldest block goes and the turn's task message
        stays pinned in front of the window. Returns the messages that left the prompt, or
        None when only the pinned task and the newest block are left.
        """
        blocks = self.window_blocks()
        later_turns = [b.start for b in blocks if b.kind == "user" and b.start > self.start]
        new_pin: int | None
        if later_turns:
            new_start, new_pin = later_turns[0], None
        else:
            opens_turn = bool(blocks) and blocks[0].kind == "user"
            body = blocks[1:] if opens_turn else blocks
            if len(body) <= 1:
                return None
            new_start = body[1].start
            new_pin = blocks[0].start if opens_turn else self.pin
        dropped = [i for i in self.window_indices() if i < new_start and i != new_pin]
        self.tokens -= sum(self.cost(self.shown(self.history[i])) for i in dropped)
        opener_before = self.cost(self.opener())
        note = bool((self.ledger.get("window") or {}).get("task_dropped"))
        keep_note = note and not later_turns  # still mid-turn without its task
        self.start, self.pin = new_start, new_pin
        self.ledger["window"] = {
            "start_id": self.history[self.start].id,
            "pin_id": self.history[self.pin].id if self.pin is not None else None,
        }
        if keep_note:
            self.ledger["window"]["task_dropped"] = True
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
        self.ledger["window"] = {
            "start_id": self.history[self.start].id,
            "pin_id": None,
            "task_dropped": True,
        }
        self.decide("shrink", before, message_ids=[task.id or ""], detail={"task_dropped": True})
        return True

    def tokens_with_summary(self, text: str) -> int:
        """Prompt tokens if `text` became the running summary (nothing is changed)."""
        saved_summary, saved_hint = self.ledger.get("summary"), self.ledger.get("hint")
        current = self.cost(self.system_message()) + self.cost(self.summary_message())
        try:
            self.ledger["hint"] = None  # as in set_summary
            self.ledger["summary"] = {**(saved_summary or {}), "text": text}
            probe = self.cost(self.system_message()) + self.cost(self.summary_message())
        finally:
            self.ledger["summary"], self.ledger["hint"] = saved_summary, saved_hint
        return self.tokens - current + probe

    def fit_summary(self, text: str, *, min_chars: int = 200) -> str | None:
        """`text`, cut down so the prompt with it as the summary stays under the trigger.

        A summarizer bounds its output in characters, not in this budget's tokens, so a
        summary can outgrow a small window. Under the trigger, the next calls do not edit
        again at once; when the prompt is over the trigger even without a summary, the limit
        is the bound. Cutting drops the oldest items of the largest section first
        (deterministic). Returns None when not even `min_chars` would fit.
        """
        from langgraph_ctx.summarize import fallback_summary

        limit = self.budget.trigger_tokens
        if self.tokens_with_summary("") > limit:
            limit = self.budget.limit
        if self.tokens_with_summary(text) <= limit:
            return text
        chars = len(text)
        while chars > min_chars:
            chars = max(min_chars, chars * 3 // 4)
            candidate = fallback_summary([], previous=text, max_chars=chars)
            if self.tokens_with_summary(candidate) <= limit:
                return candidate
        return None

    def set_summary(
        self, text: str, covered: list[BaseMessage], dump_ref: str | None, source: str
    ) -> None:
        """Fold a new running summary into the ledger and the token count."""
        old_sys, old_sum = self.cost(self.system_message()), self.cost(self.summary_message())
        previous = self.ledger.get("summary") or {}
        self.ledger["hint"] = None  # the running summary takes over from a rebuild hint
        self.ledger["summary"] = {
            "text": text,
            "covered_ids": _union(previous.get("covered_ids", []), [m.id or "" for m in covered]),
            "dump_refs": list(previous.get("dump_refs", [])) + ([dump_ref] if dump_ref else []),
            "source": source,
            "updates": int(previous.get("updates", 0)) + 1,
        }
        self.tokens += (
            self.cost(self.system_message()) + self.cost(self.summary_message()) - old_sys - old_sum
        )


def _estimate_compacted(work: Workspace, message: BaseMessage, preview_chars: int) -> int:
    text = text_of(message)
    entry = {
        "tool": tool_of(message),
        "chars": len(text),
        "input": "",
        "ref": "x" * 90,
        "preview": text[:preview_chars],
    }
    return work.cost(replace_text(message, compacted_text(entry))) + 40


def _union(old: Sequence[str], new: Sequence[str]) -> list[str]:
    """`old`, then the ids of `new` not yet in it, in order: a message is covered once."""
    merged = list(old)
    seen = set(merged)
    for message_id in new:
        if message_id not in seen:
            seen.add(message_id)
            merged.append(message_id)
    return merged
