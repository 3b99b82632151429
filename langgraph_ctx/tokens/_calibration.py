"""Calibration of an approximate counter from the provider's real prompt sizes.

Every build remembers, in the ledger, the prompt it built (`pending`: the id of the last history
message it saw, its estimate, and its raw estimate by part). The next build of the thread finds
the reply to that prompt (the message right after that id) and, when the reply carries
`usage_metadata["input_tokens"]`, keeps the observation (the parts and the provider's count)
and learns a ratio per part from the newest ones (`tokens._ratios`: one scalar ratio cannot
describe prompts whose mix of text, tool calls and schemas changes from call to call). Since
it lives in the ledger, the ratios are the same for the same state after a restart, a replay
or a fork. A provider overflow refutes the ratios under 1 (`after_overflow`). This pairs each
reply with the prompt that was really sent (after pruning, summaries and windowing), which the
history alone cannot tell.

Pure: decisions on the ledger and the message list; the ledger writes are `langgraph_ctx.ledger`'s.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

from langgraph_ctx.ledger.edits import (
    record_calibration,
    set_calibration_learned,
    set_calibration_pending,
)
from langgraph_ctx.ledger.schema import ContextLedger
from langgraph_ctx.tokens._ratios import MAX_RATIO, WINDOW, applied, fit
from langgraph_ctx.tokens.approximate import PARTS

__all__ = [
    "after_overflow",
    "current_ratio",
    "current_ratios",
    "forget_prompt",
    "observe",
    "received_prompt",
    "remember_prompt",
    "reported_input_tokens",
]


def current_ratio(ledger: ContextLedger) -> float:
    """The ratio of the newest observed prompt, all parts together (1.0 before any)."""
    ratio = (ledger.get("calibration") or {}).get("ratio", 1.0)
    if not isinstance(ratio, (int, float)) or not math.isfinite(ratio) or ratio <= 0:
        return 1.0
    return float(min(ratio, MAX_RATIO))


def current_ratios(ledger: ContextLedger) -> dict[str, float] | None:
    """The ratio of each part the ledger holds; None when nothing was learned yet.

    A ledger written before ratios per part gives its one ratio to every part.
    """
    entry: Any = ledger.get("calibration") or {}
    ratios = entry.get("ratios")
    if isinstance(ratios, Mapping):
        return {p: float(ratios.get(p, 1.0)) for p in PARTS}
    if entry.get("samples"):
        return dict.fromkeys(PARTS, current_ratio(ledger))
    return None


def reported_input_tokens(message: BaseMessage) -> int | None:
    """`usage_metadata["input_tokens"]` of an AI message, when it is a whole number > 0."""
    if not isinstance(message, AIMessage):
        return None
    usage: dict[str, Any] = dict(message.usage_metadata or {})
    tokens = usage.get("input_tokens")
    if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens > 0:
        return tokens
    return None


def observe(ledger: ContextLedger, history: Sequence[BaseMessage]) -> dict[str, float] | None:
    """Learn from the reply to the previous prompt, if the history holds it; the ratios to use.

    Writes the observation into `ledger` (through `ledger.record_calibration`). None: nothing
    was learned yet (count with the counter as it is).
    """
    entry: Any = ledger.get("calibration") or {}
    pending = entry.get("pending")
    if not pending or not pending.get("after_id"):
        return current_ratios(ledger)
    after_id = pending["after_id"]
    # The prompt's last message is near the end: search backwards.
    at = next((i for i in range(len(history) - 1, -1, -1) if history[i].id == after_id), None)
    if at is None or at + 1 >= len(history):
        return current_ratios(ledger)
    reported = reported_input_tokens(history[at + 1])
    parts = pending.get("parts")
    if reported is None or not isinstance(parts, Mapping) or sum(parts.values()) <= 0:
        # No count, or a prompt remembered before ratios per part: nothing to learn from.
        forget_prompt(ledger)
        return current_ratios(ledger)
    estimated = int(pending.get("tokens") or 0)
    observation = {"parts": dict(parts), "reported": reported, "estimated": estimated}
    seen = [*entry.get("seen", []), observation][-WINDOW:]
    record_calibration(
        ledger,
        learned=_learned(seen),
        estimated=estimated,
        reported=reported,
    )
    return current_ratios(ledger)


def _learned(seen: list[dict[str, Any]], floor: float = 0.0) -> dict[str, Any]:
    """The calibration fields `seen` teach (`tokens._ratios`), no ratio under `floor`."""
    ratios = {p: max(floor, r) for p, r in applied(fit(seen), seen).items()}
    newest = seen[-1]["parts"] if seen else {}
    raw = sum(newest.values())
    ratio = sum(ratios[p] * newest.get(p, 0.0) for p in PARTS) / raw if raw > 0 else 1.0
    return {"ratio": round(ratio, 6), "ratios": ratios, "seen": seen}


def remember_prompt(
    ledger: ContextLedger,
    history: Sequence[BaseMessage],
    tokens: int,
    parts: Mapping[str, float],
) -> None:
    """Note the prompt just built (its estimate, its raw parts) to pair it with its reply."""
    after_id = history[-1].id if history else None
    raw = sum(parts.values())
    ratio = tokens / raw if raw > 0 else 1.0
    set_calibration_pending(
        ledger,
        after_id=after_id,
        tokens=tokens,
        ratio=round(ratio, 6),
        parts={p: round(v, 3) for p, v in parts.items()},
    )


def received_prompt(
    ledger: ContextLedger | dict[str, Any], tokens: int, added: Mapping[str, float] | None
) -> None:
    """The model received `tokens` (counted at the call), not the build's estimate.

    A middleware inside `ContextMiddleware` may add to the prompt after the build; the reply's
    usage counts what the model received, so that is what it is paired with (else the ratios
    would learn the middleware's additions as a counting error). `added` is the raw estimate
    by part of what changed (None: unknown, and the reply is not learned from).
    """
    pending = (ledger.get("calibration") or {}).get("pending")
    if not pending or not pending.get("after_id"):
        return
    parts = pending.get("parts")
    if isinstance(parts, Mapping) and added is not None:
        parts = {p: max(0.0, round(parts.get(p, 0.0) + added.get(p, 0.0), 3)) for p in PARTS}
    else:
        parts = None
    set_calibration_pending(
        ledger,  # type: ignore[arg-type]
        after_id=pending["after_id"],
        tokens=tokens,
        ratio=float(pending.get("ratio", 1.0)),
        parts=parts,
    )


def after_overflow(ledger: ContextLedger | None) -> ContextLedger | None:
    """The ledger to rebuild with after the provider refused a prompt as too long.

    The prompt fit our count and the provider counted more: every ratio under 1 is refuted
    (the observations came from prompts unlike this one). The observations the provider
    counted under our raw estimate are forgotten, the others learned again with no ratio
    under 1, and so is the reply not yet observed (the rebuild would learn it again): the
    rebuild and the calls after it count at least as our own counter does until new replies
    teach otherwise. A copy; `ledger` is left as it is.
    """
    entry: Any = (ledger or {}).get("calibration")
    if ledger is None or not entry:
        return ledger
    updated: ContextLedger = dict(ledger)  # type: ignore[assignment]
    if "ratios" not in entry:  # a ledger written before ratios per part: start again
        set_calibration_learned(updated, {"ratio": 1.0, "samples": []})
    else:
        seen = [s for s in entry.get("seen", []) if s["reported"] >= sum(s["parts"].values())]
        set_calibration_learned(updated, _learned(seen, floor=1.0))
    set_calibration_pending(updated, after_id=None, tokens=0, ratio=current_ratio(updated))
    return updated


def forget_prompt(ledger: ContextLedger) -> None:
    """Pair no reply with a remembered prompt (the next prompt is counted another way)."""
    set_calibration_pending(ledger, after_id=None, tokens=0, ratio=current_ratio(ledger))
