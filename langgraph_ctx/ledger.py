"""The context ledger: everything the pipeline keeps between calls, as JSON-able data.

It lives in graph state (`ContextState["context"]`), keyed by message ids and never by list
positions, so it survives every checkpointer, resume, replay and fork. Custom classes in
checkpointed state trip `LANGGRAPH_STRICT_MSGPACK`; this is dicts, lists, strings and numbers.
"""

from __future__ import annotations

import copy
from typing import Any, TypedDict


class PrunedEntry(TypedDict, total=False):
    """A tool output shown as a placeholder in the prompt (the state keeps the original)."""

    tool: str
    chars: int
    ref: str


class CompactedEntry(TypedDict, total=False):
    """A tool output externalized to the archive."""

    ref: str
    tool: str
    chars: int
    input: str
    preview: str


class SummaryEntry(TypedDict, total=False):
    """The running summary of what left the prompt window."""

    text: str
    covered_ids: list[str]
    dump_refs: list[str]
    source: str
    updates: int


class WindowEntry(TypedDict, total=False):
    """Where the prompt's history window starts."""

    start_id: str | None
    pin_id: str | None
    task_dropped: bool


class HintEntry(TypedDict, total=False):
    """A compression hint injected after a session rebuild."""

    text: str
    cleared_ids: list[str]
    dump_ref: str | None
    prompt_tokens: int
    after_id: str | None


class EntitiesEntry(TypedDict, total=False):
    """Extracted entity state."""

    values: dict[str, Any]
    last_input_id: str | None
    error: str | None


class ContextLedger(TypedDict, total=False):
    """The JSON-able record the pipeline persists (all keys optional)."""

    pruned: dict[str, PrunedEntry]
    compacted: dict[str, CompactedEntry]
    window: WindowEntry
    summary: SummaryEntry | None
    hint: HintEntry | None
    entities: EntitiesEntry | None
    last_report: dict[str, Any] | None


LEDGER_KEYS = ("pruned", "compacted", "window", "summary", "hint", "entities", "last_report")


def empty_ledger() -> ContextLedger:
    """A ledger with nothing recorded."""
    return ContextLedger(
        pruned={}, compacted={}, window={}, summary=None, hint=None, entities=None, last_report=None
    )


def load_ledger(state: dict[str, Any] | None) -> ContextLedger:
    """A deep copy of `state` filled with defaults; the input is never mutated."""
    ledger = empty_ledger()
    if state:
        for key in LEDGER_KEYS:
            if key in state and state[key] is not None:
                ledger[key] = copy.deepcopy(state[key])  # type: ignore[literal-required]
    return ledger


def merge_ledger(left: dict[str, Any] | None, right: dict[str, Any] | None) -> dict[str, Any]:
    """LangGraph reducer for the ledger channel: keys in `right` replace those in `left`."""
    merged = dict(left or {})
    merged.update(right or {})
    return merged
