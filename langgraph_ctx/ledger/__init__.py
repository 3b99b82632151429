"""The context ledger: everything the pipeline keeps between calls, as JSON-able data.

It lives in graph state (`ContextState["context_ledger"]`), keyed by message ids and never by list
positions, so it survives every checkpointer, resume, replay and fork. Custom classes in
checkpointed state trip `LANGGRAPH_STRICT_MSGPACK`; this is dicts, lists, strings and numbers.

- `schema`: the ledger's keys and entries, and the empty ledger.
- `repair`: loading a persisted ledger (parts of the wrong shape are left out), its reducer.
- `summary`: the running summary's record: what it covers, the insurance dumps it names.
- `edits`: every other write (window, hint, placeholders, entities, report, calibration).

The names of those modules are importable from here too (`langgraph_ctx.ledger.fold_summary`).
"""

from __future__ import annotations

from langgraph_ctx.ledger.edits import (
    forget_entries,
    record_calibration,
    record_compacted,
    record_extraction,
    record_growth,
    record_pruned,
    set_ahead,
    set_calibration_learned,
    set_calibration_pending,
    set_called,
    set_hint,
    set_last_report,
    set_window,
)
from langgraph_ctx.ledger.repair import load_ledger, merge_ledger, repair_ledger
from langgraph_ctx.ledger.schema import (
    LEDGER_KEYS,
    AheadEntry,
    CalibrationEntry,
    CalledEntry,
    CompactedEntry,
    ContextLedger,
    EntitiesEntry,
    HintEntry,
    PrunedEntry,
    SummaryEntry,
    WindowEntry,
    empty_ledger,
    has_archived,
)
from langgraph_ctx.ledger.summary import (
    add_dump_ref,
    adopt_summary,
    covered_ids,
    fold_summary,
    record_dump_index,
)

__all__ = [
    "LEDGER_KEYS",
    "AheadEntry",
    "CalibrationEntry",
    "CalledEntry",
    "CompactedEntry",
    "ContextLedger",
    "EntitiesEntry",
    "HintEntry",
    "PrunedEntry",
    "SummaryEntry",
    "WindowEntry",
    "add_dump_ref",
    "adopt_summary",
    "covered_ids",
    "empty_ledger",
    "fold_summary",
    "forget_entries",
    "has_archived",
    "load_ledger",
    "merge_ledger",
    "record_calibration",
    "record_compacted",
    "record_dump_index",
    "record_extraction",
    "record_growth",
    "record_pruned",
    "repair_ledger",
    "set_ahead",
    "set_calibration_learned",
    "set_calibration_pending",
    "set_called",
    "set_hint",
    "set_last_report",
    "set_window",
]
