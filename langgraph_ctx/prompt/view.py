"""`PromptView`: what the model will see in one build, its token cost, and the edits on it.

A build makes one view of the thread (the base system prompt, the history window, the ledger of
earlier edits) and hands it to each strategy in turn. The view owns the window and the
rendering; it knows nothing of when or why to edit: that is each strategy's algorithm
(`langgraph_ctx.strategies`). Nothing here does I/O.

Token counts are kept incrementally (per-message costs from the cached counter); the final
prompt is counted in full once, at the end of the build.

The class reads in this order: its fields; how a build sets it up (restoring the window,
repairing the shown history, reconciling the ledger); the reads of its window; the rendering
(the base system message with every fragment in its stable position, the running summary, each
history message as the prompt shows it, the user stand-in that may open the conversation); its
goals (target, trigger); the edits strategies make (each keeps `tokens` up to date); the
running summary.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal, NamedTuple

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from langgraph_ctx._effects import Plan
from langgraph_ctx._ids import derived_id
from langgraph_ctx.ledger.edits import record_compacted, record_growth, record_pruned, set_window
from langgraph_ctx.ledger.schema import CompactedEntry, ContextLedger, PrunedEntry
from langgraph_ctx.ledger.summary import fold_summary, listed_dump_refs
from langgraph_ctx.messages.blocks import Block, is_user_input, split_blocks
from langgraph_ctx.messages.content import get_tag, text_of, with_id
from langgraph_ctx.messages.repair import (
    conversation_start_message,
    in_conversation_form,
    needs_conversation_form,
    repair_messages,
)
from langgraph_ctx.messages.validation import check_tool_args, check_unique_ids
from langgraph_ctx.prompt.assembly import merge_system, render_entities, render_memory
from langgraph_ctx.prompt.fallback import fallback_summary
from langgraph_ctx.prompt.render import (
    RenderCache,
    compacted_text,
    pruned_text,
    recall_note,
    replace_text,
    shortened_turn,
    still_describes,
    summary_body,
    summary_message_for,
    task_dropped_message,
    tool_of,
)
from langgraph_ctx.prompt.report import ContextBudget, ContextCostReport, Decision, DecisionKind
from langgraph_ctx.tokens.counter import TokenCounter, checked_count

SummaryPlacement = Literal["after_task", "separate", "merged"]
"""Where the running summary goes (`ContextManager(summary_placement=...)`)."""


@dataclass(kw_only=True)
class Resources:
    """What a build may use for I/O, as plan factories (None when not configured)."""

    archive_messages: Callable[[list[BaseMessage]], Plan[dict[str, str]]] | None = None
    """Write messages one by one, index them by id; the plan returns their refs by id."""
    dump_messages: Callable[[list[BaseMessage]], Plan[str]] | None = None
    """Write a list as one insurance dump; the plan returns its ref."""
    summarize: Callable[[list[BaseMessage], str | None], Plan[Any]] | None = None
    """Summarize messages, folding a previous summary; the plan returns a `SummaryOutcome`."""
    extract: Callable[[list[BaseMessage], dict[str, Any] | None], Plan[dict[str, Any]]] | None = (
        None
    )
    """Update entity state from recent messages; the plan returns the new values."""
    ahead: Any = None
    """The thread's `AheadBinding` when summaries are prepared ahead (`strategies.ahead`)."""


class WindowMark(NamedTuple):
    """A window position (`PromptView.window_mark`): start, pinned task, tokens, ledger entry."""

    start: int
    pin: int | None
    tokens: int
    window: dict[str, Any]


@dataclass(kw_only=True, eq=False)
class PromptView:
    """The prompt of one build as strategies see it and edit it.

    Read: `tokens` (the prompt's cost now, tool schemas included), `budget`, `window()` (the
    history messages in the prompt, originals), `shown(message)` (how one appears),
    `render()` (the prompt), `cost(message)`, `ledger` (what earlier builds recorded).

    Edit: `protect`, `prune`, `compact`, `shrink_once`, `drop_task`, `drop_memory`,
    `restore_memory`, `set_summary`; every edit keeps `tokens` up to date. Record what you did
    with `record`: it becomes a decision of the `context_cost` report.

    Views are made by `ContextManager.build`; a strategy never builds one.
    """

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
    summary_placement: SummaryPlacement = "after_task"
    """Where the running summary goes: after the pinned task as user text, its own system
    message after the base one, or merged into the base (`ContextManager`)."""
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
    memo: dict[Any, Any] = field(init=False, default_factory=dict)
    """What a strategy worked out from the history once per build (the history is fixed)."""
    _fixed_tokens: int = field(init=False, default=0)
    _summary_tokens: int = field(init=False, default=0)
    _attempts: dict[str, int] = field(init=False, default_factory=dict)
    _empty: int = field(init=False, default=0)
    # The history is fixed once the view is set up, so its block split and user turns are
    # worked out once per build, not at each shrink (that made a first build quadratic).
    _blocks: list[Block] = field(init=False, default_factory=list)
    _block_at: dict[int, int] = field(init=False, default_factory=dict)
    _next_user: list[int] = field(init=False, default_factory=list)
    _user_inputs: list[int] | None = field(init=False, default=None)

    # --- setup ------------------------------------------------------------------------------

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

    # --- reads of the window ----------------------------------------------------------------

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

    # --- rendering --------------------------------------------------------------------------

    def count_full(self) -> int:
        """Exact count of the rendered prompt, tool schemas included."""
        return checked_count(self.counter, self.render()) + self.tool_tokens

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
            text = summary_body(summary["text"], summary.get("quotes") or ())
            refs = listed_dump_refs(summary)
            note = recall_note(refs, summary.get("dump_index"), self.search_tool)
            fragments.append(f"<summary>\n{text}\n</summary>" + (f"\n{note}" if note else ""))
        if self.memory_items and not self.memory_dropped:
            fragments.append(render_memory(self.memory_items))
        key = ("system", tuple((m.id, text_of(m)) for m in self.base), tuple(fragments))
        system: SystemMessage | None = self.render_cache.get(
            key, lambda: merge_system(self.base, fragments)
        )
        return system

    def summary_message(self) -> BaseMessage | None:
        """The running summary as the prompt shows it, when it is a message of its own.

        A system message (`separate`), or the same text as a user message (`after_task`: it
        follows the pinned task, and Anthropic takes system text only at the start); None when
        merged into the base system message or carried by the hint.
        """
        summary = self.ledger.get("summary")
        if not summary or not summary.get("text") or self.summary_placement == "merged":
            return None
        if (self.ledger.get("hint") or {}).get("text"):
            return None  # the compression hint carries the summary
        text = summary["text"]
        covered = int(summary.get("covered", 0))
        refs = tuple(listed_dump_refs(summary))
        index = summary.get("dump_index")
        quotes = tuple(summary.get("quotes") or ())
        search = self.search_tool
        as_user = self.summary_placement == "after_task"
        message: BaseMessage = self.render_cache.get(
            ("summary", text, covered, refs, index, quotes, search, as_user),
            lambda: summary_message_for(
                text, covered, refs, dump_index=index, quotes=quotes, search=search, as_user=as_user
            ),
        )
        return message

    def _head_cost(self) -> int:
        """Tokens of the base system message and the running summary message."""
        return self.cost(self.system_message()) + self.cost(self.summary_message())

    def shown(self, message: BaseMessage) -> BaseMessage:
        """How a history message appears in the prompt.

        With the tool-call ids the repair gave it (`reshown`); a placeholder when pruned or
        compacted; a system or blank user message inside the conversation in the form every
        provider accepts (`in_conversation_form`).
        """
        mid = message.id or ""
        message = self.reshown.get(mid, message)
        shown = message
        # A compacted entry wins over a pruned one (compaction replaces an earlier pruning).
        excerpt = partial(compacted_text, search=self.search_tool)
        for kind, text_for in (("compacted", excerpt), ("pruned", pruned_text)):
            entry = self.ledger[kind].get(mid)  # type: ignore[literal-required]
            if entry is not None:
                # The text is made only when the cache has no placeholder for this entry.
                make: Callable[[], BaseMessage] = partial(
                    _placeholder, message, text_for, mid, entry, kind
                )
                if isinstance(message, AIMessage):  # a model turn is shortened, not replaced
                    make = partial(shortened_turn, message, mid, entry)
                key = (kind, mid, self.search_tool)
                shown = self.render_cache.placeholder(key, entry, message, make)
                break
        if not needs_conversation_form(shown):
            return shown
        converted: BaseMessage = self.render_cache.get(
            # Everything the converted copy takes from `shown` is in the key (ids collide
            # across the threads one manager serves).
            ("conversation_form", mid, shown.type, text_of(shown), _tag_key(shown)),
            lambda: in_conversation_form(shown),
        )
        return converted

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

    def render(self) -> list[BaseMessage]:
        """The prompt as it stands.

        The summary comes after what no fold changes: the base system message and, with
        `after_task`, the pinned task. A fold rewrites the summary, and a provider's cache
        serves a prompt only up to its first changed message, so the task placed before the
        summary is served from the cache after every fold instead of being sent again.
        """
        window = [self.shown(self.history[i]) for i in self.window_indices()]
        task = 1 if self.summary_placement == "after_task" and self.pin is not None else 0
        head = (self.system_message(), *window[:task], self.summary_message(), self.opener())
        return [m for m in head if m is not None] + window[task:]

    # --- goals ------------------------------------------------------------------------------

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
        return self._head_cost() + pinned + self.tool_tokens

    def over_trigger(self) -> bool:
        """Whether edits are due: the prompt passed the trigger in this build.

        Sticky: once the prompt passed the trigger, edits go on down to the target even when
        an earlier strategy already brought it under the trigger (hysteresis keeps the prompt
        prefix stable for many calls between edits).
        """
        if not self.edits_started and self.tokens > self.trigger:
            self.edits_started = True
        return self.edits_started

    # --- edits ------------------------------------------------------------------------------

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
        self._record_compacted(msg, entry)

    def shorten_turn(
        self, index: int, ref: str, *, lines: list[int] | None, max_arg_chars: int
    ) -> None:
        """Show the model turn at history `index` shortened (`shortened_turn`); `ref` archives it.

        `lines`: the lines of its text kept (None: all); string tool-call arguments longer than
        `max_arg_chars` are cut (0: none).
        """
        msg = self.history[index]
        text = text_of(msg)
        entry: CompactedEntry = {"ref": ref, "tool": "", "chars": len(text), "preview": text[:100]}
        if lines is not None:
            entry["lines"] = list(lines)
        if max_arg_chars:
            entry["max_arg"] = max_arg_chars
        self._record_compacted(msg, entry)

    def _record_compacted(self, msg: BaseMessage, entry: CompactedEntry) -> None:
        """Record `entry` as the compaction of `msg`, keeping `tokens` up to date."""
        old = self.cost(self.shown(msg))
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

    # --- the running summary ----------------------------------------------------------------

    def tokens_with_summary(
        self, text: str, quotes: Sequence[str] | None = None, dump_ref: str | None = None
    ) -> int:
        """Prompt tokens if `text` (and `quotes`) became the running summary (no change).

        `dump_ref`: the insurance dump `set_summary` would add (the summary message names it).
        """
        saved_summary, saved_hint = self.ledger.get("summary"), self.ledger.get("hint")
        current = self._head_cost()
        refs = list((saved_summary or {}).get("dump_refs") or []) + ([dump_ref] if dump_ref else [])
        try:
            self.ledger["hint"] = None  # as in set_summary
            trial: Any = {**(saved_summary or {}), "text": text, "dump_refs": refs}
            if quotes is not None:
                trial["quotes"] = list(quotes)
            self.ledger["summary"] = trial
            probe = self._head_cost()
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
    ) -> tuple[str, Sequence[str] | None] | None:
        """`text` and `quotes`, cut down so the prompt with them keeps to `summary_limit`.

        Measured as `set_summary` will show them: with the insurance dump `dump_ref` named. A
        summarizer bounds its output in characters, not in this budget's tokens, so a summary
        can outgrow a small window. Cutting drops the oldest items of the largest section
        first (deterministic), down to `min_chars`; when even that does not fit, the quoted
        lines are halved, the last (the least recently used) first, down to none: a summary
        without quotes is better than none. Returns None when nothing fits.
        """
        while True:
            fitted = self._fit_text(text, min_chars, quotes, dump_ref)
            if fitted is not None:
                return fitted, quotes
            if not quotes:
                return None
            quotes = list(quotes)[: len(quotes) // 2]

    def _fit_text(
        self, text: str, min_chars: int, quotes: Sequence[str] | None, dump_ref: str | None
    ) -> str | None:
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
        old = self._head_cost()
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
        self.tokens += self._head_cost() - old


def _tag_key(message: BaseMessage) -> str:
    return json.dumps(get_tag(message), sort_keys=True, default=str)


def _placeholder(
    message: BaseMessage,
    text_for: Callable[[str, Mapping[str, Any], str | None], str],
    mid: str,
    entry: Mapping[str, Any],
    kind: str,
) -> BaseMessage:
    tag = get_tag(message)
    # Our own stand-in fed back as history has no original lines to excerpt.
    original = None if tag.get("pruned") or tag.get("compacted") else text_of(message)
    return replace_text(message, text_for(mid, entry, original), **{kind: True})
