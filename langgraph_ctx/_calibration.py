"""Old import path of `langgraph_ctx.tokens._calibration`, where the code lives now.

Kept so that existing imports keep working; the package itself imports the new location.
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
