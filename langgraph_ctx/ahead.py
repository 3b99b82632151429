"""Old import path, kept so that existing imports keep working.

The code now lives in `langgraph_ctx.strategies.ahead` and `langgraph_ctx.strategies.ahead_span`
(the window's decisions and the span they record), `langgraph_ctx.summaries.preparer` (the
preparations themselves) and `langgraph_ctx.pipeline.steps` (`thread_key`); the package itself
imports it from there.
"""

from __future__ import annotations

from langgraph_ctx.pipeline.steps import thread_key
from langgraph_ctx.strategies.ahead import (
    DEFER_CALLS,
    LOOKAHEAD_CALLS,
    LOOKAHEAD_SHARE,
    SummarizePlan,
    Taken,
    accept_tokens,
    count_down,
    plan_defer,
    plan_prepare,
    slack_tokens,
    take_prepared,
)
from langgraph_ctx.strategies.ahead_span import span_digest
from langgraph_ctx.summaries.preparer import (
    AheadBinding,
    SummaryPreparer,
)

__all__ = [
    "AheadBinding",
    "DEFER_CALLS",
    "LOOKAHEAD_CALLS",
    "LOOKAHEAD_SHARE",
    "SummarizePlan",
    "SummaryPreparer",
    "Taken",
    "accept_tokens",
    "count_down",
    "plan_defer",
    "plan_prepare",
    "slack_tokens",
    "span_digest",
    "take_prepared",
    "thread_key",
]
