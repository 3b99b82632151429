"""Old import path, kept so that existing imports keep working.

The code now lives in `langgraph_ctx.archive.dumps` (the plans that write and read the dump
index) and `langgraph_ctx.ledger.summary` (the rules on the ledger's side); the package itself
imports it from there.
"""

from __future__ import annotations

from langgraph_ctx.archive.dumps import (
    all_dump_refs,
    plan_all_dump_refs,
    plan_spill_dump_refs,
)
from langgraph_ctx.ledger.summary import (
    DUMP_REFS_KEPT,
    DUMP_REFS_MAX,
    dump_index_text,
    dump_refs_to_spill,
    listed_dump_refs,
    parse_dump_index,
    spill_now,
)

__all__ = [
    "DUMP_REFS_KEPT",
    "DUMP_REFS_MAX",
    "all_dump_refs",
    "dump_index_text",
    "dump_refs_to_spill",
    "listed_dump_refs",
    "parse_dump_index",
    "plan_all_dump_refs",
    "plan_spill_dump_refs",
    "spill_now",
]
