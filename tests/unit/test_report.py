from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.exceptions import ContextOverflowError

from langgraph_ctx.errors import ConfigError, ContextWindowExceededError, LangGraphCtxError
from langgraph_ctx.prompt.report import ContextBudget, ContextCostReport, Decision, brief_report

tokens = st.integers(0, 10**7)
fractions = st.floats(0.01, 1.0)


@given(window=tokens, reserved=tokens)
def test_limit_is_window_minus_reserved_never_below_zero(window: int, reserved: int) -> None:
    budget = ContextBudget(context_window_tokens=window, reserved_output_tokens=reserved)
    assert budget.limit == max(0, window - reserved)
    assert budget.limit >= 0


@given(window=tokens, reserved=tokens, a=fractions, b=fractions, c=fractions)
def test_target_never_above_trigger_never_above_limit(
    window: int, reserved: int, a: float, b: float, c: float
) -> None:
    # The contract: 0 < target <= trigger <= 1 and 0 < summary_target <= trigger (the summary
    # target may sit above or below the target).
    budget = ContextBudget(
        context_window_tokens=window,
        reserved_output_tokens=reserved,
        trigger=max(a, b, c),
        target=min(a, b),
        summary_target=c,
    )
    assert 0 <= budget.target_tokens <= budget.trigger_tokens <= budget.limit
    assert 0 <= budget.summary_target_tokens <= budget.trigger_tokens


def test_budget_defaults_and_example() -> None:
    budget = ContextBudget(context_window_tokens=32_000, reserved_output_tokens=4_000)
    assert budget.limit == 28_000
    assert 0 < budget.target_tokens < budget.trigger_tokens < budget.limit
    assert 0 < budget.summary_target_tokens <= budget.target_tokens  # summaries cut deeper
    marks = ContextBudget(context_window_tokens=32_000, trigger=0.9, target=0.5)
    assert (marks.limit, marks.trigger_tokens, marks.target_tokens) == (32_000, 28_800, 16_000)
    with pytest.raises(AttributeError):
        budget.trigger = 0.5  # type: ignore[misc]  # frozen


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"context_window_tokens": -1}, "context_window_tokens must be >= 0, got -1"),
        ({"reserved_output_tokens": -5}, "reserved_output_tokens must be >= 0, got -5"),
        ({"trigger": 0.5, "target": 0.6}, "target <= trigger"),
        ({"target": 0.0}, "0 < target"),
        ({"target": -0.1}, "target=-0.1"),
        ({"trigger": 1.5}, "trigger <= 1"),
        ({"summary_target": 0.0}, "0 < summary_target"),
        ({"summary_target": 0.95}, "summary_target <= trigger"),
        # The default summary target (0.05) is above a trigger this low: say so, do not clamp.
        ({"trigger": 0.03, "target": 0.03}, "summary_target=0.05"),
        ({"cache_price": 0.0}, "cache_price must be a number in \\(0, 1\\]"),
        ({"cache_price": "0.1"}, "got str '0.1'; pass e.g. cache_price=0.1"),
    ],
)
def test_budget_config_errors(kwargs: dict[str, float], match: str) -> None:
    args: dict[str, float] = {"context_window_tokens": 1000, **kwargs}
    with pytest.raises(ConfigError, match=match):
        ContextBudget(**args)  # type: ignore[arg-type]


def make_report(*, ok: bool = True) -> ContextCostReport:
    report = ContextCostReport(limit=1000, tokens=0, tokens_in=2400, messages_in=40)
    report.add(Decision(kind="drop_memory", tokens_before=2400, tokens_after=2200))
    report.add(
        Decision(
            kind="prune",
            tokens_before=2200,
            tokens_after=1500,
            attempt=1,
            message_ids=["tool1_1", "tool2_1"],
            detail={"placeholder": "[pruned]", "kept_errors": 1},
        )
    )
    report.add(Decision(kind="shrink", tokens_before=1500, tokens_after=900, detail={"turns": 2}))
    report.tokens, report.messages_out = 900, 12
    if not ok:
        report.add(Decision(kind="error", tokens_before=900, tokens_after=900))
        report.ok, report.error = False, "one turn alone needs 1200 tokens"
    return report


@pytest.mark.parametrize("ok", [True, False])
def test_report_json_round_trip(ok: bool) -> None:
    report = make_report(ok=ok)
    text = json.dumps(report.to_dict())
    again = ContextCostReport.from_dict(json.loads(text))
    assert again == report
    assert again.to_dict() == report.to_dict()
    assert isinstance(again.decisions[1], Decision)
    assert json.dumps(again.to_dict()) == text


def test_report_helpers() -> None:
    report = make_report()
    assert report.kinds() == ["drop_memory", "prune", "shrink"]
    assert [d.saved for d in report.decisions] == [200, 700, 600]
    assert report.summary_line() == "900/1000 tokens (drop_memory, prune, shrink)"
    assert ContextCostReport(limit=10, tokens=3).summary_line() == "3/10 tokens (no edits)"
    assert ContextCostReport.from_dict({"limit": 5, "tokens": 1}).decisions == []


def test_context_window_exceeded_is_a_context_overflow_carrying_the_report() -> None:
    report = make_report(ok=False)
    error = ContextWindowExceededError("the prompt cannot fit 1000 tokens", report)
    assert isinstance(error, ContextOverflowError)
    assert isinstance(error, LangGraphCtxError)
    with pytest.raises(ContextOverflowError, match="cannot fit") as info:
        raise error
    assert info.value.report is report  # type: ignore[attr-defined]
    assert info.value.report.kinds()[-1] == "error"  # type: ignore[attr-defined]


def test_brief_report_keeps_sizes_and_counts_and_reads_back() -> None:
    report = ContextCostReport(limit=1000, tokens=800, tokens_in=5000, messages_in=40)
    ids = [f"m{i}" for i in range(30)]
    report.record(
        "compact", tokens_before=5000, tokens_after=800, message_ids=ids, detail={"x": "y" * 999}
    )
    full = report.to_dict()
    brief = brief_report(full)
    assert {k: brief[k] for k in ("limit", "tokens", "tokens_in", "ok", "error")} == {
        "limit": 1000,
        "tokens": 800,
        "tokens_in": 5000,
        "ok": True,
        "error": None,
    }
    assert brief["decisions"] == [
        {
            "kind": "compact",
            "attempt": None,
            "tokens_before": 5000,
            "tokens_after": 800,
            "messages": 30,
        }
    ]
    assert len(json.dumps(brief)) * 5 < len(json.dumps(full))
    again = ContextCostReport.from_dict(brief)
    assert again.tokens == 800 and again.kinds() == ["compact"] and again.decisions[0].saved == 4200
