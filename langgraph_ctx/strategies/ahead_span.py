"""The span a summary prepared ahead covers: where the window will start, and its digest.

`dry_run` shrinks a scratch copy of the view as the window will at the trigger, a little
deeper, to find the span; `span_digest` names it with the summary it folds into, so a prepared
summary is used only for exactly what it was made from; `valid_record` and `reachable` check that a
recorded span still holds (see `langgraph_ctx.strategies.ahead`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage, ToolMessage

from langgraph_ctx._effects import Plan
from langgraph_ctx._ids import sha256_of
from langgraph_ctx._lru import LRUCache
from langgraph_ctx.ledger.schema import AheadEntry
from langgraph_ctx.messages.blocks import is_user_input
from langgraph_ctx.prompt.view import Resources
from langgraph_ctx.strategies.summaries import conversation_of, summary_goal

if TYPE_CHECKING:
    from langgraph_ctx.prompt.view import PromptView


def span_digest(previous: str | None, messages: Sequence[BaseMessage]) -> str:
    """A digest of a span and of the running summary it folds into.

    Two spans get one digest only when every message has the same id, type and content (tool
    calls and names included) and the previous summary is the same text.
    """
    h = sha256_of(json.dumps(previous or "").encode())
    for m in messages:
        h.update(_message_digest(m))
    return h.hexdigest()[:32]


_DIGESTS: LRUCache[int, tuple[BaseMessage, Any, bytes]] = LRUCache(max_items=4096)


def _message_digest(m: BaseMessage) -> bytes:
    """One message's digest, cached by object.

    A build near the trigger checks its recorded span on every call, and most of the span's
    messages are the same objects as in the last call. The cache holds the message itself (so
    an object id is never reused while cached) and its content object: content assigned anew
    is digested again.
    """
    key = id(m)
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
    digest = sha256_of(text.encode()).digest()
    _DIGESTS.put(key, (m, m.content, digest))
    return digest


def previous_summary(view: PromptView) -> str | None:
    """The running summary's text in the view's ledger, or `None`."""
    return (view.ledger.get("summary") or {}).get("text")


def _span(view: PromptView, entry: AheadEntry) -> tuple[int, list[BaseMessage]] | None:
    """Where the recorded start is now, and what moving the window there drops (conversation).

    None when the record's start is not ahead of the window in the history any more.
    """
    start_id, pin_id = entry.get("start_id"), entry.get("pin_id")
    history = view.history
    after = bool(entry.get("after"))  # the span ends with `start_id`'s message
    first = view.start if after else view.start + 1
    at = next((i for i in range(first, len(history)) if history[i].id == start_id), None)
    if at is not None and after:
        at = at + 1 if at + 1 < len(history) else None  # nothing came after it yet
    if at is None:
        return None
    indices = view.window_indices()
    pin = next((i for i in indices if i < at and history[i].id == pin_id), None)
    if pin_id is not None and pin is None:
        return None
    span = conversation_of([history[i] for i in indices if i < at and i != pin])
    return at, span


def valid_record(view: PromptView) -> tuple[AheadEntry, int, list[BaseMessage]] | None:
    """The ledger's ahead record, where its start is now and its span, while still valid."""
    entry = view.ledger.get("ahead")
    if not entry:
        return None
    found = _span(view, entry)
    if found is None or not found[1]:
        return None
    at, span = found
    if span_digest(previous_summary(view), span) != entry.get("digest"):
        return None
    return entry, at, span


def new_turn_since(view: PromptView, entry: AheadEntry) -> bool:
    """Whether a user turn began after the preparation started.

    The window then shrinks by whole turns where it moved block by block within the task's
    turn, so the recorded start may not be where it will move: worked out again.
    """
    started = entry.get("started")
    for message in reversed(view.history):
        if message.id == started:
            return False
        if is_user_input(message):
            return True
    return False


def reachable(view: PromptView, entry: AheadEntry, at: int, span: list[BaseMessage]) -> bool:
    """Whether the window, shrunk on a scratch copy, stops where the record says.

    At the recorded start, pinning the recorded task, with exactly the span leaving: what
    taking the prepared summary at the trigger needs.
    """
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


def dry_run(
    view: PromptView, deeper: int, pruners: Sequence[Any]
) -> tuple[str, str | None, list[BaseMessage], bool] | None:
    """Shrink a scratch copy of the view as the window will at the trigger, a little deeper.

    Pruning runs without I/O (placeholders without references cost about the same). Returns
    the window's start and pinned task after it, the conversation that left, and whether the
    span takes the newest block too (`after`: the window will start after the returned id).

    When only the pinned task and the newest block are left and the cut still asks for
    more, the newest block joins the span: by the trigger the prompt will have grown, so it
    will not be the newest any more, and the window would cut it there without preparing.
    Left out, it stayed in the window after the prepared summary with everything that came
    since the preparation, and the next summary came sooner.
    """
    scratch = _scratch(view)
    scratch.edits_started = True  # as at the trigger: pruning and shrinking are due

    def prune() -> Plan[None]:
        for pruner in pruners:
            yield from pruner.apply(scratch)

    if not _no_io(prune()):
        return None
    goal = summary_goal(scratch) - deeper
    dropped: list[BaseMessage] = []
    after = False
    history = scratch.history
    pinned = scratch.pin
    while scratch.tokens > goal:
        step = scratch.shrink_once()
        if step is None:
            pinned = scratch.pin
            # Only mid-turn (the newest message a tool's output, a model call to follow in
            # the same turn): a new turn would move the window by whole turns instead.
            after = bool(history) and isinstance(history[-1], ToolMessage)
            if after:
                rest = list(range(scratch.start, len(history)))
                if pinned is None and is_user_input(history[scratch.start]):
                    pinned = rest.pop(0)  # the turn's task stays, pinned, as the window keeps it
                dropped.extend(history[i] for i in rest)
            break
        pinned = scratch.pin
        dropped.extend(step)
        if not _no_io(prune()):
            return None
    span = conversation_of(dropped)
    if not span:
        return None
    pin = history[pinned].id if pinned is not None else None
    start = history[-1 if after else scratch.start]
    return start.id or "", pin, span, after


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
