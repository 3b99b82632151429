"""Summaries prepared ahead: the summarizer runs while the agent works, not in its model call.

`SlidingWindow(summarize=True)` summarizes what leaves the window once the prompt passes the
trigger (0.9 of the limit), and the model call that passed it waits for the summarizer: seconds
with a real model. With `SlidingWindow(prepare_at=0.85)` (what
`ContextManager(prepare_summaries=True)` sets) the work moves ahead:

1. **Prepare.** A build whose prompt is under the trigger but near it (over `prepare_at`, or
   within `LOOKAHEAD_CALLS` calls growing like the last one) works out, on a scratch copy of
   the view, the span the next summary will cover: a dry run of the window's shrink, cut
   deeper by the growth expected until the trigger. It records the span in the ledger
   (`ahead`: where the window will start, the pinned task, a digest of the span and of the
   summary it folds into, the newest message and the prompt's size when it started) and yields
   a `PrepareSummary` effect: the sync driver starts a worker thread, the async driver an
   asyncio task, each running the summarizer's own plan. One preparation runs per thread at a
   time, keyed by thread, so a manager shared by many threads never mixes them. A new user
   turn, or a span that changed (an edit, a removal), makes the next build work it out again.
2. **Take.** A build over the trigger whose ledger names a span that is still valid
   (same messages, same content, same previous summary: the digest) moves the window to the
   recorded start and summarizes exactly that span: with the prepared outcome (`AwaitPrepared`,
   waiting a bounded time for one still running), else by calling the summarizer as without
   preparation. The ledger, not timing, decides the span, so the prompt is the same either
   way for the same summarizer answers. What came since the preparation stays in the window
   up to `accept_tokens`; only beyond that is more cut and folded in the call, as before. A
   prompt that jumped over the trigger but that pruning and compaction brought back under it
   does not cut in that call: its span is recorded and prepared, and the cut waits up to
   `DEFER_CALLS` calls, counted down in the ledger (`plan_defer`).

A record that no longer matches, a preparation lost with its process (the outcome lives in
memory, the record in the ledger: after a restart the span is summarized when the trigger is
reached, or prepared again), or no record at all: the build summarizes as it always did. The
insurance dump is written before the summary replaces the messages, and `redact` applies, on
the prepared path exactly as on the other (both run through `summarize_span`).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage

from langgraph_ctx._effects import (
    AwaitPrepared,
    Plan,
    PrepareSummary,
    Resources,
)
from langgraph_ctx._preparer import SummaryPreparer
from langgraph_ctx.ledger.edits import set_ahead
from langgraph_ctx.ledger.schema import AheadEntry

if TYPE_CHECKING:
    from langgraph_ctx.archive import Archive
    from langgraph_ctx.prompt.view import PromptView

__all__ = [
    "DEFER_CALLS",
    "LOOKAHEAD_CALLS",
    "LOOKAHEAD_SHARE",
    "AheadBinding",
    "SummarizePlan",
    "SummaryPreparer",
    "Taken",
    "accept_tokens",
    "count_down",
    "plan_defer",
    "plan_prepare",
    "slack_tokens",
    "span_digest",
    "take_prepared",
    "thread_key",
]

SummarizePlan = Callable[[list[BaseMessage], "str | None"], Plan[Any]]
"""A summarizer's plan factory: `(messages, previous) -> Plan[SummaryOutcome]`."""


def span_digest(previous: str | None, messages: Sequence[BaseMessage]) -> str:
    """A digest of a span and of the running summary it folds into.

    Two spans get one digest only when every message has the same id, type and content (tool
    calls and names included) and the previous summary is the same text.
    """
    h = hashlib.sha256(json.dumps(previous or "").encode())
    for m in messages:
        h.update(_message_digest(m))
    return h.hexdigest()[:32]


_DIGESTS: OrderedDict[int, tuple[BaseMessage, Any, bytes]] = OrderedDict()
_DIGESTS_LOCK = threading.Lock()
_DIGESTS_MAX = 4096


def _message_digest(m: BaseMessage) -> bytes:
    """One message's digest, cached by object.

    A build near the trigger checks its recorded span on every call, and most of the span's
    messages are the same objects as in the last call. The cache holds the message itself (so
    an object id is never reused while cached) and its content object: content assigned anew
    is digested again.
    """
    key = id(m)
    with _DIGESTS_LOCK:
        hit = _DIGESTS.get(key)
    if hit is not None and hit[0] is m and hit[1] is m.content:
        return hit[2]
    row = [
        m.id,
        m.type,
        m.content,
        getattr(m, "tool_calls", None),
        getattr(m, "tool_call_id", None),
        m.name,
    ]
    text = json.dumps(row, sort_keys=True, default=str, ensure_ascii=False)
    digest = hashlib.sha256(text.encode()).digest()
    with _DIGESTS_LOCK:
        _DIGESTS[key] = (m, m.content, digest)
        _DIGESTS.move_to_end(key)
        while len(_DIGESTS) > _DIGESTS_MAX:
            _DIGESTS.popitem(last=False)
    return digest


def thread_key(archive: Archive | None, history: Sequence[BaseMessage]) -> str:
    """The thread a build is for: its archive's user and thread, else its first message id."""
    if archive is not None:
        return json.dumps(["archive", archive.user_id, archive.thread_id])
    first = history[0].id if history else None
    return json.dumps(["first", first])


@dataclass(frozen=True, slots=True)
class AheadBinding:
    """The preparer as one build of one thread uses it (`Resources.ahead`)."""

    preparer: SummaryPreparer
    """Where preparations live."""
    key: str
    """The thread (`thread_key`)."""
    summarize: SummarizePlan
    """The summarizer's plan factory."""
    wait_seconds: float | None
    """Longest wait at the trigger for a preparation still running (`None`: until it ends)."""

    def plan_start(
        self, digest: str, messages: Sequence[BaseMessage], previous: str | None
    ) -> Plan[bool]:
        """Start preparing `messages` (idempotent); the plan returns whether it started."""
        started = yield PrepareSummary(
            self.preparer, self.key, digest, self.summarize, tuple(messages), previous
        )
        return bool(started)

    def plan_outcome(
        self, digest: str, messages: list[BaseMessage], previous: str | None, note: dict[str, Any]
    ) -> Plan[Any]:
        """The prepared outcome of `digest`, else the summarizer's (`note["ahead"]` says which)."""
        outcome = yield AwaitPrepared(self.preparer, self.key, digest, self.wait_seconds)
        if outcome is not None:
            note["ahead"] = "prepared"
            return outcome
        note["ahead"] = "not ready: summarized now"
        return (yield from self.summarize(messages, previous))


# --- the decisions (pure, on the view) ------------------------------------------------------


def slack_tokens(view: PromptView, prepare_at: float) -> int:
    """Tokens the prompt may grow between the preparation and the trigger."""
    return max(0, int((view.budget.trigger - prepare_at) * view.budget.limit))


def _previous(view: PromptView) -> str | None:
    return (view.ledger.get("summary") or {}).get("text")


def _span(view: PromptView, entry: AheadEntry) -> tuple[int, list[BaseMessage]] | None:
    """Where the recorded start is now, and what moving the window there drops (conversation).

    None when the record's start is not ahead of the window in the history any more.
    """
    from langgraph_ctx.strategies.summaries import conversation_of

    start_id, pin_id = entry.get("start_id"), entry.get("pin_id")
    history = view.history
    at = next((i for i in range(view.start + 1, len(history)) if history[i].id == start_id), None)
    if at is None:
        return None
    indices = view.window_indices()
    pin = next((i for i in indices if i < at and history[i].id == pin_id), None)
    if pin_id is not None and pin is None:
        return None
    span = conversation_of([history[i] for i in indices if i < at and i != pin])
    return at, span


def _valid(view: PromptView) -> tuple[AheadEntry, int, list[BaseMessage]] | None:
    entry = view.ledger.get("ahead")
    if not entry:
        return None
    found = _span(view, entry)
    if found is None or not found[1]:
        return None
    at, span = found
    if span_digest(_previous(view), span) != entry.get("digest"):
        return None
    return entry, at, span


LOOKAHEAD_CALLS = 3
"""A preparation also starts when the last call's growth, this many times over, would pass the
trigger: a step that adds much gets its summary prepared earlier."""


LOOKAHEAD_SHARE = 0.2
"""The earliest a preparation starts: this share of the limit before the trigger."""


def plan_prepare(
    view: PromptView,
    *,
    prepare_at: float,
    pruners: Sequence[Any],
    now: bool = False,
    read_shown: bool = False,
) -> Plan[None]:
    """Under the trigger, with the trigger near: record the next span and start preparing it.

    Near means over `prepare_at` of the limit, or within `LOOKAHEAD_CALLS` calls growing as
    much as the last one did (the ledger's last report gives the previous prompt's size);
    `now` prepares whatever the size (see `plan_defer`). `read_shown`: the summarizer reads
    the span as the prompt shows it (`SlidingWindow.summarize_shown`), as it would in the call.
    """
    ahead = view.resources.ahead
    if ahead is None or view.resources.summarize is None:
        return
    trigger = view.trigger  # the budget's, or earlier with a cache price
    last = (view.ledger.get("last_report") or {}).get("tokens")
    growth = view.tokens - last if isinstance(last, int) and last < view.tokens else 0
    near = view.tokens > trigger - slack_tokens(view, prepare_at)
    # Never earlier than `LOOKAHEAD_SHARE` of the limit before the trigger: what came since
    # the preparation stays in the window, so an early one makes the next summary come early.
    reach = min(LOOKAHEAD_CALLS * growth, int(LOOKAHEAD_SHARE * view.budget.limit))
    soon = view.tokens + reach > trigger
    if not (now or near or soon or view.ledger.get("ahead")):
        return
    valid = _valid(view)
    if valid is not None:
        entry, at, span = valid
        newest = view.history[-1].id if view.history else None
        if _new_turn_since(view, entry):
            if not _reachable(view, entry, at, span):
                valid = None  # the window will not move there any more: worked out again
            else:  # checked up to here
                set_ahead(view.ledger, {**entry, "started": newest})
        if valid is not None:  # recorded already: (re)start it, e.g. after a restart
            read = [view.shown(m) for m in span] if read_shown else span
            yield from ahead.plan_start(entry["digest"], read, _previous(view))
            return
    # Cut deeper by what the prompt will grow until the trigger: then, at the trigger, the
    # window holds about what it would after a summary made there.
    deeper = max(slack_tokens(view, prepare_at), trigger - view.tokens)
    found = _dry_run(view, deeper, pruners)
    if found is None:
        set_ahead(view.ledger, None)
        return
    start_id, pin_id, span = found
    digest = span_digest(_previous(view), span)
    newest = view.history[-1].id if view.history else None
    set_ahead(
        view.ledger,
        {
            "start_id": start_id,
            "pin_id": pin_id,
            "digest": digest,
            "count": len(span),
            "started": newest,
            "tokens": view.report.tokens_in,
        },
    )
    yield from ahead.plan_start(
        digest, [view.shown(m) for m in span] if read_shown else span, _previous(view)
    )
    view.record(
        "prepare",
        view.tokens,
        message_ids=[m.id or "" for m in span],
        detail={"messages": len(span), "start_id": start_id, "digest": digest},
    )


DEFER_CALLS = 2
"""Calls a summary due at the trigger may wait for its preparation (see `plan_defer`)."""


def plan_defer(
    view: PromptView, *, prepare_at: float, pruners: Sequence[Any], read_shown: bool = False
) -> Plan[bool]:
    """The prompt passed the trigger but earlier strategies brought it back under: wait?

    A step that jumps over the trigger (a large output, compacted on arrival) would make the
    window cut and summarize in this call. Instead the span is recorded and prepared now, and
    the cut waits up to `DEFER_CALLS` calls while the prompt stays under the trigger (each
    call counts down in the ledger, so the decision is data, not timing). Returns whether the
    cut waits; when it does not, the window takes the recorded span as at the trigger.
    """
    if view.resources.ahead is None or view.resources.summarize is None:
        return False
    valid = _valid(view)
    if valid is None:
        yield from plan_prepare(
            view, prepare_at=prepare_at, pruners=pruners, now=True, read_shown=read_shown
        )
        entry = view.ledger.get("ahead")
        if not entry:
            return False
        set_ahead(view.ledger, {**entry, "due": DEFER_CALLS})
        return True
    entry = valid[0]
    due = int(entry.get("due", DEFER_CALLS))
    if due <= 0:
        return False
    set_ahead(view.ledger, {**entry, "due": due})
    yield from plan_prepare(view, prepare_at=prepare_at, pruners=pruners, read_shown=read_shown)
    return True


def count_down(view: PromptView) -> bool:
    """One call less for a deferred cut; whether it is due in this call (see `plan_defer`)."""
    entry = view.ledger.get("ahead")
    if not entry or "due" not in entry:
        return False
    due = int(entry["due"]) - 1
    set_ahead(view.ledger, {**entry, "due": max(0, due)})
    return due <= 0


def _new_turn_since(view: PromptView, entry: AheadEntry) -> bool:
    """Whether a user turn began after the preparation started.

    The window then shrinks by whole turns where it moved block by block within the task's
    turn, so the recorded start may not be where it will move: worked out again.
    """
    from langgraph_ctx.messages.blocks import is_user_input

    started = entry.get("started")
    for message in reversed(view.history):
        if message.id == started:
            return False
        if is_user_input(message):
            return True
    return False


def accept_tokens(view: PromptView) -> int:
    """What the window may keep after taking a prepared summary: half way to the trigger.

    The span was cut deeper for the growth expected until the trigger; what came since stays
    in the window up to this rather than cost a second summarizer call inside the model call.
    Beyond it the window cuts on and folds the rest in the call, as without preparing: keeping
    more makes the next summary come sooner, which costs more than it saves.
    """
    final_goal = view.summary_goal
    return max(final_goal, (final_goal + view.trigger) // 2)


def _reachable(view: PromptView, entry: AheadEntry, at: int, span: list[BaseMessage]) -> bool:
    """Whether the window, shrunk on a scratch copy, stops where the record says.

    At the recorded start, pinning the recorded task, with exactly the span leaving: what
    taking the prepared summary at the trigger needs.
    """
    from langgraph_ctx.strategies.summaries import conversation_of

    scratch = _scratch(view)
    dropped: list[BaseMessage] = []
    while scratch.start < at:
        step = scratch.shrink_once()
        if step is None:
            return False
        dropped.extend(step)
    pin = scratch.history[scratch.pin].id if scratch.pin is not None else None
    same = [m.id for m in conversation_of(dropped)] == [m.id for m in span]
    return scratch.start == at and pin == entry.get("pin_id") and same


def _dry_run(
    view: PromptView, deeper: int, pruners: Sequence[Any]
) -> tuple[str, str | None, list[BaseMessage]] | None:
    """Shrink a scratch copy of the view as the window will at the trigger, a little deeper.

    Pruning runs without I/O (placeholders without references cost about the same). Returns
    the window's start and pinned task after it, and the conversation that left.
    """
    from langgraph_ctx.strategies.summaries import conversation_of
    from langgraph_ctx.strategies.window import summary_goal

    scratch = _scratch(view)
    scratch.edits_started = True  # as at the trigger: pruning and shrinking are due

    def prune() -> Plan[None]:
        for pruner in pruners:
            yield from pruner.apply(scratch)

    if not _no_io(prune()):
        return None
    goal = summary_goal(scratch) - deeper
    dropped: list[BaseMessage] = []
    while scratch.tokens > goal:
        step = scratch.shrink_once()
        if step is None:
            break
        dropped.extend(step)
        if not _no_io(prune()):
            return None
    span = conversation_of(dropped)
    if not span:
        return None
    pin = scratch.history[scratch.pin].id if scratch.pin is not None else None
    return scratch.history[scratch.start].id or "", pin, span


def _no_io(plan: Plan[None]) -> bool:
    """Drive an I/O-free plan; False when it asked for I/O after all."""
    try:
        plan.send(None)
    except StopIteration:
        return True
    plan.close()
    return False


def _scratch(view: PromptView) -> PromptView:
    """A copy of `view` whose edits touch nothing of the original (ledger, report, scans)."""
    import copy

    scratch = copy.copy(view)
    ledger: Any = dict(view.ledger)
    ledger["pruned"] = dict(view.ledger["pruned"])
    ledger["compacted"] = dict(view.ledger["compacted"])
    scratch.ledger = ledger
    scratch.report = copy.copy(view.report)
    scratch.report.decisions = list(view.report.decisions)
    scratch.resume = dict(view.resume)
    scratch.protected_ids = set(view.protected_ids)
    scratch.static_fragments = list(view.static_fragments)
    scratch.resources = Resources()
    scratch._attempts = dict(view._attempts)
    return scratch


@dataclass
class Taken:
    """What `take_prepared` did at the trigger."""

    pending: list[BaseMessage] = field(default_factory=list)
    """Messages that left the window."""
    summarize: SummarizePlan | None = None
    """Summarizes them (the prepared outcome, else the summarizer); None when the record did
    not apply: the window then shrinks and summarizes as without preparation."""
    note: dict[str, Any] = field(default_factory=dict)
    """For the report: `ahead` says whether the prepared summary was used, or why not."""


def take_prepared(view: PromptView, *, pruners: Sequence[Any]) -> Plan[Taken]:
    """At the trigger: move the window to the recorded start when the record is still valid."""
    from langgraph_ctx.strategies.summaries import conversation_of

    note: dict[str, Any] = {}
    ahead: AheadBinding | None = view.resources.ahead
    valid = _valid(view)
    if view.ledger.get("ahead") and valid is None:
        note["ahead"] = "stale: the span changed"
    set_ahead(view.ledger, None)
    if ahead is None or valid is None:
        return Taken(note=note)
    entry, at, span = valid
    pending: list[BaseMessage] = []
    while view.start < at:
        step = view.shrink_recorded(reason="prepared summary")
        if step is None:
            break
        pending.extend(step)
        for pruner in pruners:
            yield from pruner.apply(view)
    pin = view.history[view.pin].id if view.pin is not None else None
    same = [m.id for m in conversation_of(pending)] == [m.id for m in span]
    if view.start != at or pin != entry.get("pin_id") or not same:
        note["ahead"] = "the window moved otherwise"
        return Taken(pending, None, note)
    digest = entry["digest"]

    def summarize(messages: list[BaseMessage], prev: str | None) -> Plan[Any]:
        return ahead.plan_outcome(digest, messages, prev, note)

    return Taken(pending, summarize, note)
