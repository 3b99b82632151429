"""`BuildResult`: what one build of the pipeline returns."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage

from langgraph_ctx.ledger.summary import covered_ids
from langgraph_ctx.prompt.render import references_recall
from langgraph_ctx.prompt.report import ContextCostReport


@dataclass(frozen=True, slots=True)
class BuildResult:
    """What one build returns."""

    messages: list[BaseMessage]
    """The prompt to send to the model."""
    tools: list[Any]
    """The tools to bind (after `tool_policy`)."""
    state: dict[str, Any]
    """The ledger to persist (JSON-able, keyed by message ids)."""
    report: ContextCostReport
    """The `context_cost` report."""
    history: Sequence[BaseMessage] = ()
    """The history the build was given (not copied), for `removable_ids`."""

    @property
    def names_recall(self) -> bool:
        """Whether the prompt tells the model to call `recall` (in a piece of ours)."""
        return references_recall(self.messages)

    @property
    def removable_ids(self) -> list[str]:
        """Ids summarized with an insurance dump: safe to remove from live state.

        Derived from the history on each access (`ledger.covered_ids`), not stored.
        """
        summary = self.state.get("summary") or {}
        if not (summary.get("dump_refs") or summary.get("dump_index")):
            return []
        return covered_ids(self.history, self.state)
