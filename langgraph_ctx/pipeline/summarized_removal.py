"""Which summarized messages leave the live history, and what the ledger records when they do.

The rule `ContextMemory(remove_summarized=...)` applies and every replay of it repeats: the
messages a build's summary covers (`BuildResult.removable_ids`) that are still in the history
leave it by id, but only after the span they sit in, with one kept neighbour on each side, is
written to the archive as one more insurance dump (so the full history keeps every one in its
place). Pure decisions on plain data; the graph's removal plan and the replay write the dump.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage

from langgraph_ctx.ledger.edits import forget_entries
from langgraph_ctx.ledger.summary import add_dump_ref

__all__ = ["SummarizedRemoval", "summarized_removal"]


@dataclass(frozen=True)
class SummarizedRemoval:
    """The messages to remove and the span to dump first."""

    ids: list[str]
    """The ids of the messages that leave, in history order."""
    span: list[BaseMessage]
    """What the dump holds: from the first to the last removed message, with one kept
    neighbour on each side (it anchors the span in the live history)."""

    def ledger_after(self, state: dict[str, Any], ref: str) -> dict[str, Any]:
        """The ledger once the span is dumped under `ref` and the messages are gone."""
        state = dict(state)
        add_dump_ref(state, ref, listed=False)
        forget_entries(state, set(self.ids))
        return state


def summarized_removal(
    messages: Sequence[BaseMessage], removable_ids: Sequence[str]
) -> SummarizedRemoval | None:
    """The removal of the `removable_ids` still in `messages`; None when none is there."""
    covered = set(removable_ids)
    at = [i for i, m in enumerate(messages) if m.id and m.id in covered]
    if not at:
        return None
    span = list(messages[max(0, at[0] - 1) : at[-1] + 2])
    return SummarizedRemoval([messages[i].id or "" for i in at], span)
