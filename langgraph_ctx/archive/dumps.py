"""The archive's dump index: how a thread's insurance dumps stay findable with a bounded ledger.

Every summary (and every removal) writes an insurance dump. The ledger names only the newest
(`DUMP_REFS_KEPT`, the reference the summary message shows the agent); when a summary lands,
older references move into a new archive entry, the dump index, which lists them and names
the index before it (`plan_spill_dump_refs`). `all_dump_refs` follows that chain back, so the
full history still finds every dump. Removal spans are `unlisted`: the summary message does not
name them (its dumps hold what was summarized), so a removal does not change the prompt.

The rules on the ledger's side (which refs to move, the index entry's text) are
`langgraph_ctx.ledger.summary`'s; this module holds the plans that write and read the archive.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from langgraph_ctx._effects import Plan, run_plan
from langgraph_ctx.errors import ArchiveError
from langgraph_ctx.ledger.schema import ContextLedger
from langgraph_ctx.ledger.summary import (
    dump_index_text,
    dump_refs_to_spill,
    parse_dump_index,
    record_dump_index,
)

if TYPE_CHECKING:
    from langgraph_ctx.archive.archive import Archive

logger = logging.getLogger("langgraph_ctx._dumps")  # the name it always had
"""Warnings for what a run survives but an operator should see."""


def plan_spill_dump_refs(
    ledger: ContextLedger | dict[str, Any], archive: Archive
) -> Plan[str | None]:
    """Move the dump refs beyond the newest `DUMP_REFS_KEPT` into a new archive dump index.

    The index is written first; only then does the ledger name it instead of those refs. When
    the archive fails, the ledger keeps every ref (a later call tries again). Returns why it
    could not, or None (moved, or nothing to move).
    """
    spilled = dump_refs_to_spill(ledger)
    if not spilled:
        return None
    previous = (ledger.get("summary") or {}).get("dump_index")
    try:
        ref: str = yield from archive.plan_put_text(dump_index_text(spilled, previous))
    except ArchiveError as exc:
        logger.warning("dump refs kept in the ledger: the dump index write failed: %s", exc)
        return f"dump index not written, the ledger keeps its dump refs: {exc}"
    record_dump_index(ledger, spilled, ref)
    return None


def plan_all_dump_refs(ledger: Mapping[str, Any] | None, archive: Archive) -> Plan[list[str]]:
    """`all_dump_refs` as a plan: it reads the chain of dump indexes, newest first."""
    summary = (ledger or {}).get("summary") or {}
    older: list[list[str]] = []
    index, seen = summary.get("dump_index"), set()
    while isinstance(index, str) and index not in seen:
        seen.add(index)
        text = yield from archive.plan_read(index)
        try:
            refs, index = parse_dump_index(text if isinstance(text, str) else "")
        except ValueError as exc:
            msg = f"the ledger names {index} as its dump index, but: {exc}"
            raise ArchiveError(msg) from exc
        older.insert(0, refs)
    return [*itertools.chain.from_iterable(older), *(summary.get("dump_refs") or [])]


def all_dump_refs(ledger: Mapping[str, Any] | None, archive: Archive) -> list[str]:
    """Every insurance dump of a thread, oldest first: the archive's dump index, then the ledger's.

    The ledger names only the newest dumps (`ledger.DUMP_REFS_KEPT`); older ones are listed in
    a chain of index entries in the archive (`summary["dump_index"]`), so the ledger stays
    the same size however long the thread runs.

    Raises:
        ArchiveError: An index entry cannot be read.
    """
    return run_plan(plan_all_dump_refs(ledger, archive))
