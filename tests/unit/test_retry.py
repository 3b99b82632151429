"""The rebuild decision after a failed model call (`graph/attempts.py`), without an agent.

From the attempt and the failure: the next attempt (what the refusal taught, another model's
target, a harder build after a provider overflow) or the error to raise, whose report says why.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from langchain_core.exceptions import ContextOverflowError

from langgraph_ctx.errors import ContextWindowExceededError, ModelCallRefusedError
from langgraph_ctx.graph.attempts import (
    MAX_REBUILDS,
    Attempt,
    CalledModel,
    CallRefused,
    KnownModels,
    Received,
    Target,
    after_failure,
    identity_of,
    too_little_left,
)
from langgraph_ctx.prompt.report import ContextCostReport
from langgraph_ctx.scripted import ScriptedChatModel
from langgraph_ctx.tokens import get_counter

COUNTER = get_counter("gpt-4o")
MODEL = ScriptedChatModel(profile={"max_input_tokens": 8_000})
SMALL = ScriptedChatModel(profile={"max_input_tokens": 2_000})
OTHER_COUNTER = get_counter("claude-sonnet-4-5")


def attempt(**changes: Any) -> Attempt:
    requested = Target(MODEL, COUNTER, 8_000)
    first = Attempt(requested, CalledModel(), requested)
    return replace(first, **changes)


def received(**changes: Any) -> Received:
    """The built-for model received 900 tokens more than the build, over its budget."""
    values: dict[str, Any] = {
        "tokens": 8_500,
        "limit": 7_000,
        "window": 8_000,
        "added": 900,
        "unchanged": False,
        "recall_bound": True,
        "names_recall": False,
        "model": MODEL,
        "counter": COUNTER,
    }
    return Received(**{**values, **changes})


def report() -> ContextCostReport:
    return ContextCostReport(limit=7_000, tokens=6_900)


def test_a_refusal_that_teaches_an_addition_rebuilds_for_it() -> None:
    first = attempt()
    refusal = CallRefused(received())
    retried = after_failure(first, refusal, refusal, report())
    assert isinstance(retried, Attempt)
    assert retried.called.added == 900 and retried.rebuilds == 1
    assert retried.target is first.target and not retried.harder
    assert retried.window == 8_000 - 900  # the next build leaves room for what is added


def test_a_refusal_by_another_model_rebuilds_for_that_model() -> None:
    """A fallback with a smaller window and another counter: the next build is for it."""
    other = received(window=2_000, limit=1_000, added=None, model=SMALL, counter=OTHER_COUNTER)
    retried = after_failure(attempt(), CallRefused(other), CallRefused(other), report())
    assert isinstance(retried, Attempt)
    assert retried.target.model is SMALL and retried.target.counter is OTHER_COUNTER
    assert retried.called.window == 2_000 and retried.called.names(SMALL)
    assert retried.window == 2_000


def test_a_refusal_that_teaches_nothing_is_the_error_naming_the_budget() -> None:
    taught = CalledModel(added=900)
    failed = report()
    refusal = CallRefused(received())
    error = after_failure(attempt(called=taught, rebuilds=1), refusal, refusal, failed)
    assert isinstance(error, ContextWindowExceededError)
    assert "still receives 8,500 tokens, over its budget of 7,000" in str(error)
    assert error.report is failed and not failed.ok


def test_recall_unbound_after_the_rebuilds_is_a_refused_call() -> None:
    unbound = received(tokens=100, recall_bound=False, names_recall=True)
    learned = CalledModel(added=900, recall_unbound=True)
    refusal = CallRefused(unbound)
    error = after_failure(attempt(called=learned), refusal, refusal, report())
    assert isinstance(error, ModelCallRefusedError)
    assert "Bind the recall tool" in str(error) and "binds no recall tool" in str(error)


def test_the_rebuilds_of_one_call_are_bounded() -> None:
    refusal = CallRefused(received(added=5_000))
    error = after_failure(attempt(rebuilds=MAX_REBUILDS), refusal, refusal, report())
    assert isinstance(error, ContextWindowExceededError)
    assert f"after {MAX_REBUILDS} rebuild(s)" in str(error)


def test_a_fallbacks_own_error_after_the_refusal_still_rebuilds() -> None:
    """A fallback middleware may raise its own error after the guard refused: the refusal
    (kept by the guard) decides."""
    retried = after_failure(attempt(), RuntimeError("fallback"), CallRefused(received()), report())
    assert isinstance(retried, Attempt) and retried.called.added == 900


def test_a_provider_overflow_is_rebuilt_harder_once() -> None:
    overflow = ContextOverflowError("prompt is too long")
    retried = after_failure(attempt(), overflow, None, report())
    assert isinstance(retried, Attempt) and retried.harder and retried.rebuilds == 1
    error = after_failure(retried, overflow, None, report())
    assert isinstance(error, ContextWindowExceededError)
    assert "the provider still overflowed" in str(error)


@pytest.mark.parametrize(
    "failure",
    [RuntimeError("the provider is down"), ContextWindowExceededError("no room", report())],
)
def test_other_failures_are_raised_as_they_came(failure: Exception) -> None:
    assert after_failure(attempt(), failure, None, report()) is failure


def test_a_build_without_room_names_the_inner_middleware() -> None:
    err = ContextWindowExceededError("no room", report())
    assert too_little_left(err, attempt()) is err  # nothing added inside: the build's error
    said = too_little_left(err, attempt(called=CalledModel(added=7_500, window=6_000)))
    assert "adds 7,500 tokens" in str(said) and "(6,000 tokens)" in str(said)
    assert said.report is err.report


class _Terms:
    """Counters and windows by model, as `ContextMemory` gives them."""

    def counter_for(self, model: Any = None) -> Any:
        return COUNTER if model is MODEL else OTHER_COUNTER

    def window_for(self, model: Any = None) -> int:
        return 8_000 if model is MODEL else 2_000


def test_the_first_attempt_reads_the_ledger_and_builds_for_the_fallback_it_names() -> None:
    terms, known = _Terms(), KnownModels()
    first = Attempt.first(MODEL, None, terms, known)
    assert (first.target.model, first.window, first.called) == (MODEL, 8_000, CalledModel())
    assert first.requested is first.target and first.configured == 8_000
    ledger = {"called": {"added": 300, "window": 2_000, "model": identity_of(SMALL)}}
    # Not seen in this process: built for the requested model, less what was learned.
    unseen = Attempt.first(MODEL, ledger, terms, known)
    assert unseen.target.model is MODEL and unseen.window == 2_000 - 300
    known.update([SMALL])  # the fallback was called here before: its counter from the start
    seen = Attempt.first(MODEL, ledger, terms, known)
    assert seen.target.model is SMALL and seen.target.counter is OTHER_COUNTER
    assert seen.requested.model is MODEL and seen.configured == 8_000
