"""The archive's dump index: how a thread's insurance dumps stay findable with a bounded ledger.

Every summary (and every removal) writes an insurance dump. The ledger names only the newest
(`DUMP_REFS_KEPT`, the reference the summary message shows the agent); when a summary lands,
older references move into a new archive entry, the dump index, which lists them and names
the index before it (`plan_spill_dump_refs`). `all_dump_refs` follows that chain back, so the
full history still finds every dump. Removal spans are `unlisted`: the summary message does not
name them (its dumps hold what was summarized), so a removal does not change the prompt.
"""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from langgraph_ctx._effects import Plan, run_plan
from langgraph_ctx.errors import ArchiveError, shorten
from langgraph_ctx.ledger import ContextLedger, record_dump_index

if TYPE_CHECKING:
    from langgraph_ctx.archive import Archive

logger = logging.getLogger(__name__)
"""Warnings for what a run survives but an operator should see."""

DUMP_REFS_KEPT = 1
"""Insurance dumps the summary message names: the newest one (a reference costs about 45 tokens
in every prompt; 4 cost 8% more on the cost benchmark). When a summary lands, a build with an
archive moves older ones into the archive's dump index (`plan_spill_dump_refs`), which the
summary message names too, so the ledger stays the same size as a thread grows."""

DUMP_REFS_MAX = 16
"""More refs than this in the ledger are moved to the index whatever the prompt shows."""


def listed_dump_refs(summary: Mapping[str, Any]) -> list[str]:
    """The dump refs the summary message names (not the `unlisted` removal spans)."""
    unlisted = set(summary.get("unlisted") or ())
    return [r for r in summary.get("dump_refs") or () if r not in unlisted]


def dump_refs_to_spill(ledger: Mapping[str, Any]) -> list[str]:
    """The refs to move to the dump index, oldest first (may be []).

    Everything older than the newest `DUMP_REFS_KEPT` listed refs (unlisted ones between them
    stay with them, so the order of the dumps is kept).
    """
    summary = ledger.get("summary") or {}
    refs = list(summary.get("dump_refs") or [])
    listed = listed_dump_refs(summary)
    if len(listed) <= DUMP_REFS_KEPT:
        return []
    return refs[: refs.index(listed[-DUMP_REFS_KEPT])]


def spill_now(ledger: Mapping[str, Any]) -> bool:
    """Whether a build spills dump refs before its strategies run.

    When no summary message shows the refs (a hint carries the summary), or when the ledger
    holds more than `DUMP_REFS_MAX` refs; otherwise a build whose summary changes spills
    (the summary message changes then anyway).
    """
    summary = ledger.get("summary") or {}
    hinted = bool((ledger.get("hint") or {}).get("text"))
    return bool(dump_refs_to_spill(ledger)) and (
        hinted or len(summary.get("dump_refs") or []) > DUMP_REFS_MAX
    )


def dump_index_text(spilled: Sequence[str], previous_index: str | None) -> str:
    """The archive entry listing spilled dump refs (JSON), chained to the previous index."""
    return json.dumps(
        {"langgraph_ctx": "dump_index", "dump_refs": list(spilled), "previous": previous_index},
        sort_keys=True,
    )


def parse_dump_index(text: str) -> tuple[list[str], str | None]:
    """`(dump refs, previous index ref)` of a `dump_index_text` entry.

    Raises:
        ValueError: `text` is not a dump index.
    """
    data = json.loads(text)
    if not isinstance(data, dict) or data.get("langgraph_ctx") != "dump_index":
        msg = f"not a dump index: {shorten(text)}"
        raise ValueError(msg)
    refs: Any = data.get("dump_refs")
    previous: Any = data.get("previous")
    if not _is_str_list(refs) or not (previous is None or isinstance(previous, str)):
        msg = f"malformed dump index: {shorten(text)}"
        raise ValueError(msg)
    return list(refs), previous


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


def _is_str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)
