"""Calibration of an approximate counter from the provider's real prompt sizes.

Every build remembers, in the ledger, the prompt it built (`pending`: the id of the last history
message it saw, the estimate and the ratio used). The next build of the thread finds the reply
to that prompt (the message right after that id) and, when the reply carries
`usage_metadata["input_tokens"]`, compares the provider's count with the package's own: the
observation is `reported / unscaled estimate`. The ratio applied to counts is the median of the
newest `RECENT` observations, each clamped to `[MIN_RATIO, MAX_RATIO]`, and not under 1 before
`TRUST_BELOW_ONE` observations (`ratio_of`): robust to an odd report, bounded, never NaN, and,
since it lives in the ledger, the same for the same state after a restart, a replay or a fork.
A provider overflow refutes a ratio under 1 (`after_overflow`). This pairs each reply with the
prompt that was really sent (after pruning, summaries and windowing), which the history alone
cannot tell.

Pure: decisions on the ledger and the message list; the ledger writes are `langgraph_ctx.ledger`'s.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

from langgraph_ctx.ledger.edits import (
    record_calibration,
    set_calibration_pending,
    set_calibration_samples,
)
from langgraph_ctx.ledger.schema import ContextLedger

MIN_RATIO = 0.5
"""Lowest ratio applied (a provider counting half of our estimate)."""
MAX_RATIO = 2.0
"""Highest ratio applied."""
WINDOW = 9
"""Observations kept in the ledger (the newest last)."""
RECENT = 3
"""Newest observations the median is taken over.

A prompt mostly repeats the one before it, so the newest observations predict the next best: the
ratio moves with what the prompt holds (short chat-template text early, file text later), and a
median of the last nine lagged that drift by four or five calls (`benchmarks.ratio_rules` on
llama.cpp runs). Three still outvote one odd report."""
TRUST_BELOW_ONE = 3
"""Observations needed before a ratio under 1 is applied.

A ratio under 1 lets a build hold more than the package's own count allows, so one odd early
observation must not make the next prompt overflow: a first prompt of a few words beside tool
schemas a server does not bill (a chat template that renders none) observes the 0.5 floor,
and the next prompt, a large tool output, would be counted at half its size. A ratio over 1
only makes builds smaller and is applied at once."""


def current_ratio(ledger: ContextLedger) -> float:
    """The ratio the ledger holds (1.0 when nothing was learned yet)."""
    ratio = (ledger.get("calibration") or {}).get("ratio", 1.0)
    if not isinstance(ratio, (int, float)) or not math.isfinite(ratio) or ratio <= 0:
        return 1.0
    return float(min(max(ratio, MIN_RATIO), MAX_RATIO))


def ratio_of(samples: Sequence[float]) -> float:
    """The ratio to apply given the recent observations.

    The median of the newest `RECENT`, clamped, and not under 1 before `TRUST_BELOW_ONE`
    observations.
    """
    ratio = float(min(max(statistics.median(samples[-RECENT:]), MIN_RATIO), MAX_RATIO))
    if ratio < 1.0 and len(samples) < TRUST_BELOW_ONE:
        return 1.0
    return ratio


def reported_input_tokens(message: BaseMessage) -> int | None:
    """`usage_metadata["input_tokens"]` of an AI message, when it is a whole number > 0."""
    if not isinstance(message, AIMessage):
        return None
    usage: dict[str, Any] = dict(message.usage_metadata or {})
    tokens = usage.get("input_tokens")
    if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens > 0:
        return tokens
    return None


def observe(ledger: ContextLedger, history: Sequence[BaseMessage]) -> float:
    """Learn from the reply to the previous prompt, if the history holds it; the ratio to use.

    Writes the observation into `ledger` (through `ledger.record_calibration`).
    """
    entry: Any = ledger.get("calibration") or {}
    pending = entry.get("pending")
    if not pending or not pending.get("after_id"):
        return current_ratio(ledger)
    after_id = pending["after_id"]
    # The prompt's last message is near the end: search backwards.
    at = next((i for i in range(len(history) - 1, -1, -1) if history[i].id == after_id), None)
    if at is None or at + 1 >= len(history):
        return current_ratio(ledger)
    reported = reported_input_tokens(history[at + 1])
    tokens, used = pending.get("tokens"), pending.get("ratio")
    if reported is None or not tokens or not used or tokens <= 0 or used <= 0:
        set_calibration_pending(ledger, after_id=None, tokens=0, ratio=current_ratio(ledger))
        return current_ratio(ledger)
    raw = tokens / used
    observed = min(max(reported / raw, MIN_RATIO), MAX_RATIO)
    samples = [*entry.get("samples", []), round(observed, 6)][-WINDOW:]
    ratio = ratio_of(samples)
    record_calibration(ledger, ratio=ratio, samples=samples, estimated=tokens, reported=reported)
    return ratio


def remember_prompt(
    ledger: ContextLedger, history: Sequence[BaseMessage], tokens: int, ratio: float
) -> None:
    """Note the prompt just built so the next build can pair it with its reply."""
    after_id = history[-1].id if history else None
    set_calibration_pending(ledger, after_id=after_id, tokens=tokens, ratio=ratio)


def received_prompt(ledger: ContextLedger | dict[str, Any], tokens: int) -> None:
    """The model received `tokens` (counted at the call), not the build's estimate.

    A middleware inside `ContextMiddleware` may add to the prompt after the build; the reply's
    usage counts what the model received, so that is what it is paired with (else the ratio
    would learn the middleware's additions as a counting error).
    """
    pending = (ledger.get("calibration") or {}).get("pending")
    if pending and pending.get("after_id"):
        ratio = float(pending.get("ratio", 1.0))
        set_calibration_pending(ledger, after_id=pending["after_id"], tokens=tokens, ratio=ratio)  # type: ignore[arg-type]


def after_overflow(ledger: ContextLedger | None) -> ContextLedger | None:
    """The ledger to rebuild with after the provider refused a prompt as too long.

    The prompt fit our count scaled by the ratio, and the provider counted more: any ratio
    under 1 is refuted (the observations under 1 came from prompts unlike this one, e.g. small
    ones dominated by tool schemas the provider does not bill). They are forgotten, and so is
    the reply not yet observed (the rebuild would learn it again), so the rebuild and the calls
    after it count at least as our own counter does. A copy; `ledger` is left as it is.
    """
    entry: Any = (ledger or {}).get("calibration")
    if ledger is None or not entry:
        return ledger
    samples = [s for s in entry.get("samples", []) if isinstance(s, (int, float)) and s >= 1.0]
    ratio = ratio_of(samples) if samples else 1.0
    updated: ContextLedger = dict(ledger)  # type: ignore[assignment]
    set_calibration_samples(updated, ratio=ratio, samples=samples)
    set_calibration_pending(updated, after_id=None, tokens=0, ratio=ratio)
    return updated


def forget_prompt(ledger: ContextLedger) -> None:
    """Pair no reply with a remembered prompt (the next prompt is counted another way)."""
    set_calibration_pending(ledger, after_id=None, tokens=0, ratio=current_ratio(ledger))
