"""The calibration ratio's rules on plain ledgers (`_calibration`)."""

from __future__ import annotations

from typing import Any

import pytest

from langgraph_ctx._calibration import TRUST_BELOW_ONE, after_overflow, current_ratio, ratio_of


def test_a_ratio_over_one_is_applied_at_once() -> None:
    assert ratio_of([1.3]) == pytest.approx(1.3)


def test_a_ratio_under_one_waits_for_enough_observations() -> None:
    assert ratio_of([0.5]) == 1.0
    assert ratio_of([0.5, 0.6][: TRUST_BELOW_ONE - 1]) == 1.0
    assert ratio_of([0.8, 0.9, 0.85]) == pytest.approx(0.85)


def test_the_newest_observations_decide() -> None:
    # The ratio drifts with what the prompts hold: three new observations outweigh six old
    # ones (a median over all nine would still say 1.3), and one odd report does not.
    assert ratio_of([1.3] * 6 + [0.9] * 3) == pytest.approx(0.9)
    assert ratio_of([1.3] * 8 + [2.0]) == pytest.approx(1.3)


def test_the_ratio_is_bounded() -> None:
    assert ratio_of([0.1, 0.1, 0.1]) == 0.5
    assert ratio_of([9.0]) == 2.0


def test_an_overflow_forgets_the_observations_under_one_and_the_pending_reply() -> None:
    pending = {"after_id": "m9", "tokens": 900, "ratio": 0.7}
    ledger: Any = {
        "calibration": {"ratio": 0.7, "samples": [0.6, 1.2, 0.7, 0.7], "pending": pending},
        "summary": {"text": "kept"},
    }
    updated: Any = after_overflow(ledger)
    assert updated["calibration"]["samples"] == [1.2]
    assert current_ratio(updated) == pytest.approx(1.2)
    assert updated["calibration"]["pending"] is None  # the refuted prompt is not learned again
    assert updated["summary"] == {"text": "kept"}
    assert ledger["calibration"]["ratio"] == 0.7  # the state's ledger is left as it was


def test_an_overflow_without_calibration_changes_nothing() -> None:
    assert after_overflow(None) is None
    ledger: Any = {"summary": {"text": "x"}}
    assert after_overflow(ledger) is ledger
