"""The steps of a build around its strategies: what it examines, how it counts, how it ends.

`ContextManager.plan` takes the part of the history a build examines (`examined`), the
counter it counts with (`calibrated_counter`: scaled by the ledger's learned ratios), and,
once the strategies ran, spills older dump refs within the summary's bound
(`plan_spill_within_budget`) and renders, counts and checks the prompt (`finish`).
`thread_key` names the thread a build is for (summaries prepared ahead are kept per thread).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage, SystemMessage

from langgraph_ctx._effects import Plan
from langgraph_ctx.archive.dumps import plan_spill_dump_refs
from langgraph_ctx.errors import ContextWindowExceededError
from langgraph_ctx.ledger.edits import set_last_report
from langgraph_ctx.ledger.schema import ContextLedger
from langgraph_ctx.pipeline.result import BuildResult
from langgraph_ctx.prompt.report import ContextCostReport
from langgraph_ctx.prompt.view import PromptView
from langgraph_ctx.strategies import (
    Compaction,
    SlidingWindow,
    Strategy,
)
from langgraph_ctx.tokens._calibration import forget_prompt, observe, remember_prompt
from langgraph_ctx.tokens.counter import TokenCounter

if TYPE_CHECKING:
    from langgraph_ctx.archive.archive import Archive


def examined(
    messages: Sequence[BaseMessage], state: Mapping[str, Any] | None, max_messages: int
) -> tuple[Sequence[BaseMessage], int]:
    """The part of `messages` one build examines, and how many it leaves out.

    The base prompt (leading system messages and summary), then the newest messages the
    window can still show: from the window's pinned task or start (the ledger's
    `window`) on, and never more than `max_messages` of them. A window only moves
    forward, so what lies before its start is never shown again; the work per call
    follows the window, not the thread's length. The full list stays the caller's
    (`BuildResult.history`, for `removable_ids`).
    """
    if not isinstance(messages, Sequence) or isinstance(messages, (str, bytes)):
        return messages, 0  # `coerce_messages` says what is wrong
    head = 0
    while head < len(messages) and _is_base(messages[head]):
        head += 1
    lowest = max(head, len(messages) - max_messages)
    window = state.get("window") if isinstance(state, Mapping) else None
    start = window.get("start_id") if isinstance(window, Mapping) else None
    pin = window.get("pin_id") if isinstance(window, Mapping) else None
    cut, found = lowest, False
    if isinstance(start, str):
        for i in range(len(messages) - 1, lowest - 1, -1):  # the start is near the end
            mid = getattr(messages[i], "id", None)
            if not found and mid == start:
                cut, found = i, True
                if not isinstance(pin, str):
                    break
            elif found and mid == pin:  # the pinned task opens the window's turn
                cut = i
                break
    # What is left out must not change what `split_base` takes for the base prompt: a window
    # that opens on a system message inside the conversation (shown in place as history)
    # would otherwise follow the head directly and be merged into the base on this build.
    # Start earlier, on the conversation message before it; the window still hides the rest.
    while cut > head and _is_base(messages[cut]):
        cut -= 1
    if cut <= head:
        return messages, 0
    return [*messages[:head], *messages[cut:]], cut - head


def _is_base(message: Any) -> bool:
    """Whether `message` is part of the base prompt `split_base` takes from the head."""
    from langgraph_ctx.messages.base import is_base_system, is_summary_message

    return isinstance(message, SystemMessage) and (
        is_summary_message(message) or is_base_system(message)
    )


def calibrated_counter(
    token_counter: TokenCounter,
    calibrates: bool,
    ledger: ContextLedger,
    history: Sequence[BaseMessage],
) -> tuple[TokenCounter, bool]:
    """The counter for this build, and whether it is calibrated.

    An approximation is scaled by the ledger's learned ratios, and its prompt remembered, to
    learn from the reply.

    Counters that cannot split their estimate into parts (`raw_parts` and `with_ratios`, as
    `ApproximateCounter` does: exact counters, custom callables) are used as they are; so is
    an approximation before anything is learned (its own `ratio`, 1 unless you calibrated it).
    """
    if not calibrates:
        # Another model's call: learn from the reply to the previous prompt, then forget
        # it, so that the next reply (to this prompt) is never paired with it.
        if ledger.get("calibration"):
            observe(ledger, history)
            forget_prompt(ledger)
        return token_counter, False
    with_ratios = getattr(token_counter, "with_ratios", None)
    if not callable(with_ratios) or not callable(getattr(token_counter, "raw_parts", None)):
        return token_counter, False
    ratios = observe(ledger, history)
    return (token_counter if ratios is None else with_ratios(ratios)), True


def plan_spill_within_budget(view: PromptView, archive: Archive) -> Plan[None]:
    """Spill older dump refs to the index unless the prompt would then pass its bound.

    The bound is `PromptView.summary_limit`, the one the summary was fitted to: a spill
    that pushed the prompt over the trigger would make the next build edit again.
    """
    before = view.ledger.get("summary")
    old = view.cost(view.summary_message()) + view.cost(view.system_message())
    error = yield from plan_spill_dump_refs(view.ledger, archive)
    if error is not None:
        view.record("skip", view.tokens, detail={"reason": error})
        return
    new = view.cost(view.summary_message()) + view.cost(view.system_message())
    if view.tokens - old + new > view.summary_limit():
        view.ledger["summary"] = before  # the next summary tries again
        return
    view.tokens += new - old


def finish(
    view: PromptView,
    tools: list[Any],
    calibrated: bool,
    history: Sequence[BaseMessage],
    strategies: Sequence[Strategy],
) -> BuildResult:
    """The build's result: the view reconciled, rendered and counted, its report filled in."""
    view.reconcile()  # the persisted ledger names only what the prompt shows
    prompt = view.render()
    view.tokens = view.count_full()
    report = view.report
    report.tokens, report.messages_out = view.tokens, len(prompt)
    if calibrated:
        counter: Any = view.counter
        parts = counter.raw_parts(prompt, tools)
        raw = sum(parts.values())
        report.calibration_ratio = round(view.tokens / raw, 6) if raw > 0 else 1.0
        report.calibration_ratios = dict(counter.ratios) if counter.ratios else None
        remember_prompt(view.ledger, view.history, view.tokens, parts)
    if view.tokens > view.budget.limit:
        report.fail(
            f"the prompt needs {view.tokens} tokens but the limit is {view.budget.limit} "
            f"(window {view.budget.context_window_tokens} - reserved "
            f"{view.budget.reserved_output_tokens}); tool schemas take {view.tool_tokens}. "
            + _advice(report, strategies)
        )
        view.record("error", view.tokens, detail={"reason": report.error})
        set_last_report(view.ledger, report.to_dict())
        raise ContextWindowExceededError(str(report.error), report)
    set_last_report(view.ledger, report.to_dict())
    return BuildResult(
        messages=prompt, tools=tools, state=dict(view.ledger), report=report, history=history
    )


def _advice(report: ContextCostReport, strategies: Sequence[Strategy]) -> str:
    """What to do about a prompt that cannot fit, given what was configured and tried."""
    advice = "Raise context_window_tokens, reserve fewer output tokens, shorten the system "
    summarizes = any(isinstance(s, SlidingWindow) and s.summarize for s in strategies)
    if any(isinstance(s, Compaction) for s in strategies) and summarizes:
        advice += "prompt or tools, or split the oversized message."
    else:
        advice += (
            "prompt or tools, or add Compaction() / SlidingWindow(summarize=True) so large "
            "outputs can go."
        )
    skipped = [
        str(d.detail["reason"])
        for d in report.decisions
        if d.kind == "skip" and d.detail.get("reason")
    ]
    if skipped:  # e.g. an archive write failed, so nothing could be compacted away
        advice += f" Skipped on the way: {'; '.join(dict.fromkeys(skipped))}."
    return advice


def thread_key(archive: Archive | None, history: Sequence[BaseMessage]) -> str:
    """The thread a build is for: its archive's user and thread, else its first message id."""
    if archive is not None:
        return json.dumps(["archive", archive.user_id, archive.thread_id])
    first = history[0].id if history else None
    return json.dumps(["first", first])
