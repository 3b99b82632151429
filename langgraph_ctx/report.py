"""Old import path, kept so that existing imports keep working.

The code now lives in `langgraph_ctx.prompt.report`; the package itself imports it from there.
"""

from __future__ import annotations

from langgraph_ctx.prompt.report import (
    BRIEF_IF_SET,
    BRIEF_KEYS,
    ContextBudget,
    ContextCostReport,
    Decision,
    DecisionKind,
    append_to_ledger_report,
    brief_report,
)

__all__ = [
    "BRIEF_IF_SET",
    "BRIEF_KEYS",
    "ContextBudget",
    "ContextCostReport",
    "Decision",
    "DecisionKind",
    "append_to_ledger_report",
    "brief_report",
]
