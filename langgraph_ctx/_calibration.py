"""Old import path, kept so that existing imports keep working.

The code now lives in `langgraph_ctx.tokens._calibration`; the package itself imports it from
there. The scalar rule (`ratio_of`, `RECENT`, `MIN_RATIO`) gave way to ratios per part
(`langgraph_ctx.tokens._ratios`); `benchmarks.ratio_rules` replays it for comparison.
"""

from __future__ import annotations

from langgraph_ctx.tokens._calibration import (
    MAX_RATIO,
    TRUST_BELOW_ONE,
    WINDOW,
    after_overflow,
    current_ratio,
    current_ratios,
    forget_prompt,
    observe,
    received_prompt,
    remember_prompt,
    reported_input_tokens,
)

__all__ = [
    "MAX_RATIO",
    "TRUST_BELOW_ONE",
    "WINDOW",
    "after_overflow",
    "current_ratio",
    "current_ratios",
    "forget_prompt",
    "observe",
    "received_prompt",
    "remember_prompt",
    "reported_input_tokens",
]
