"""Old import path, kept so that existing imports keep working.

The code now lives in `langgraph_ctx.graph.memory` (the full history in
`langgraph_ctx.archive.history`, the report on a message in `langgraph_ctx.prompt.report`); the
package itself imports it from there.
"""

from __future__ import annotations

from langgraph_ctx.archive.dumps import all_dump_refs
from langgraph_ctx.archive.history import (
    FullHistory,
    afull_history,
    full_history,
)
from langgraph_ctx.graph.memory import ContextMemory
from langgraph_ctx.prompt.report import (
    REPORT_KEY,
    attach_report,
)

__all__ = [
    "ContextMemory",
    "FullHistory",
    "REPORT_KEY",
    "afull_history",
    "all_dump_refs",
    "attach_report",
    "full_history",
]
