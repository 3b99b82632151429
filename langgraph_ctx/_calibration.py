"""Old import path, kept so that existing imports keep working.

The code now lives in `langgraph_ctx.tokens._calibration`; the package itself imports it from
there.
"""

from __future__ import annotations

from langgraph_ctx.tokens._calibration import (
    MAX_RATIO,
    MIN_RATIO,
    RECENT,
    TRUST_BELOW_ONE,
    WINDOW,
    after_overflow,
    current_ratio,
    forget_prompt,
    observe,
    ratio_of,
    received_prompt,
    remember_prompt,
    reported_input_tokens,
)

__all__ = [
    "MAX_RATIO",
    "MIN_RATIO",
    "RECENT",
    "TRUST_BELOW_ONE",
    "WINDOW",
    "after_overflow",
    "current_ratio",
    "forget_prompt",
    "observe",
    "ratio_of",
    "received_prompt",
    "remember_prompt",
    "reported_input_tokens",
]
