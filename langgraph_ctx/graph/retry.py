"""After a model call failed: rebuild it for another target, or the error to raise.

A pure decision, from the attempt and the failure. A refusal of the call guard
(`graph/guard.py`) must teach something (a smaller window, a larger addition, `recall`
unbound, another model's counter), and the call is rebuilt for it, at most `MAX_REBUILDS`
times; a refusal that teaches nothing proves the call cannot fit, and the error names the
cause. A provider overflow (`errors.is_context_overflow`) is rebuilt once against a smaller
window (`Attempt.harder`). Any other failure is the caller's to raise as it came.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from langgraph_ctx.errors import (
    ContextWindowExceededError,
    ModelCallRefusedError,
    is_context_overflow,
)
from langgraph_ctx.graph.called_model import CalledModel, Target
from langgraph_ctx.graph.guard import CallRefused

if TYPE_CHECKING:
    from langgraph_ctx.prompt.report import ContextCostReport

MAX_REBUILDS = 4
"""Rebuilds of one model call after refusals; each must have taught something."""


@dataclass(frozen=True, slots=True)
class Attempt:
    """One build of a model call: what it is built for, and how many rebuilds came before."""

    target: Target
    """The model the build is for, with its counter and window."""
    called: CalledModel
    """What the calls so far taught (the window to build for follows from it)."""
    configured: int
    """The window of the model the request names (what `called` keeps a smaller one below)."""
    rebuilds: int = 0
    """Rebuilds of this model call so far."""
    harder: bool = False
    """After a provider overflow: the build assumes a smaller window."""

    @property
    def window(self) -> int:
        """The window to build for: the target's, less what the calls taught."""
        return self.called.build_window(self.target.window)


def after_failure(
    attempt: Attempt,
    failure: Exception,
    refusal: CallRefused | None,
    report: ContextCostReport,
) -> Attempt | Exception:
    """The next attempt after `failure`, or the error to raise.

    The error is `failure` itself (raise it as it came) or another (raise it from `failure`).

    Args:
        attempt: The attempt that failed.
        failure: What the inner handler raised.
        refusal: The guard's refusal of the call, when it refused one (a fallback middleware
            may raise another error after it).
        report: The failed build's report; an error made here fails it and travels on it.
    """
    if isinstance(failure, ContextWindowExceededError):
        return failure
    if refusal is not None:
        received = refusal.received
        taught = attempt.called.after_refusal(received, attempt.configured)
        target = received.target() or attempt.target
        if (taught == attempt.called and target is attempt.target) or (
            attempt.rebuilds >= MAX_REBUILDS
        ):
            return _cannot_fit(report, refusal, attempt.rebuilds)
        return replace(attempt, called=taught, target=target, rebuilds=attempt.rebuilds + 1)
    if not is_context_overflow(failure):
        return failure
    if attempt.harder:
        return _failed(report, f"the provider still overflowed: {failure}")
    return replace(attempt, harder=True, rebuilds=attempt.rebuilds + 1)


def too_little_left(
    err: ContextWindowExceededError, attempt: Attempt
) -> ContextWindowExceededError:
    """The build for what the model receives failed: say so when inner middleware are why."""
    added = attempt.called.added
    if not added:
        return err
    window = attempt.called.build_window(attempt.target.window, with_added=False)
    msg = (
        f"middleware inside ContextMiddleware adds {added:,} tokens to each model "
        f"call, which leaves too little of the called model's window ({window:,} tokens) for "
        "the conversation; make it add less, or call a model with a larger window"
    )
    return ContextWindowExceededError(msg, err.report)


def _cannot_fit(report: ContextCostReport, refusal: CallRefused, rebuilds: int) -> Exception:
    """The call was rebuilt for everything the refusals taught and is still refused.

    The error's type names the cause: `ContextWindowExceededError` only when the prompt is
    over the called model's budget, `ModelCallRefusedError` otherwise.
    """
    received = refusal.received
    if received.tokens > received.limit:
        return _failed(
            report,
            f"after {rebuilds} rebuild(s) for what the model receives, the called model still "
            f"receives {received.tokens:,} tokens, over its budget of {received.limit:,} "
            f"(window {received.window:,}); make the middleware inside ContextMiddleware add "
            "less, or call a model with a larger window",
        )
    why = (
        f"after {rebuilds} rebuild(s) the model call is still refused: {refusal}; the prompt "
        "names recall(ref=...) in text langgraph_ctx does not own while the call binds no "
        "recall tool. Bind the recall tool (memory.recall_tool()) or set expose_recall=False"
    )
    report.fail(why)
    return ModelCallRefusedError(why, report)


def _failed(report: ContextCostReport, why: str) -> ContextWindowExceededError:
    """Fail the build: its report says why and travels on `ContextWindowExceededError`."""
    report.fail(why)
    return ContextWindowExceededError(str(report.error), report)
