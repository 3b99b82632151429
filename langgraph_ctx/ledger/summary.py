"""The running summary's record: what it covers, and the insurance dumps it names.

`fold_summary` makes a text the running summary; `covered_ids` derives what it covers from the
live history (never stored). The summary names only its newest insurance dumps
(`DUMP_REFS_KEPT`, the reference the summary message shows the agent); when a summary lands,
older references move into an archive entry, the dump index, which lists them and names the
index before it (`dump_refs_to_spill`, `dump_index_text`; written by
`langgraph_ctx.archive.dumps`). Removal spans are `unlisted`: the summary message does not name
them (its dumps hold what was summarized), so a removal does not change the prompt.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langgraph_ctx.errors import shorten
from langgraph_ctx.ledger.schema import ContextLedger, SummaryEntry
from langgraph_ctx.messages.base import is_summary_message, split_base
from langgraph_ctx.messages.content import get_tag


def fold_summary(
    ledger: ContextLedger,
    *,
    text: str,
    covered_ids: Sequence[str],
    dump_ref: str | None,
    source: str,
    position: Callable[[str], int] | None = None,
    quotes: Sequence[str] | None = None,
) -> SummaryEntry:
    """Make `text` the running summary, covering `covered_ids` on top of what it covered.

    The summary keeps a count and the newest covered id (`covered_last`); `position` (an id's
    place in the history) keeps `covered_last` from moving back when a reset window is
    summarized again. `dump_ref` (the insurance dump of what was summarized, if any) joins the
    dump refs. The running summary takes over from a rebuild hint, so the hint is cleared (a
    rebuild sets its new hint after this).
    """
    previous = ledger.get("summary") or {}
    ledger["hint"] = None
    last = previous.get("covered_last")
    added = len(covered_ids)
    if last is not None and position is not None:  # ids up to `last` are covered already
        floor = position(last)
        added = sum(1 for i in covered_ids if position(i) > floor)
    new_last = next((i for i in reversed(covered_ids) if i), None)
    if new_last is not None and (
        last is None or position is None or position(new_last) >= position(last)
    ):
        last = new_last
    summary: SummaryEntry = {
        "text": text,
        "covered": int(previous.get("covered", 0)) + added,
        "covered_last": last,
        "dump_refs": list(previous.get("dump_refs", [])) + ([dump_ref] if dump_ref else []),
        "source": source,
        "updates": int(previous.get("updates", 0)) + 1,
    }
    if previous.get("dump_index"):
        summary["dump_index"] = previous["dump_index"]
    kept_quotes = list(quotes) if quotes is not None else list(previous.get("quotes") or [])
    if kept_quotes:
        summary["quotes"] = kept_quotes
    ledger["summary"] = summary
    return summary


def covered_ids(messages: Sequence[Any], ledger: Mapping[str, Any] | None) -> list[str]:
    """Ids of the messages in `messages` (a thread's live state) that the summary covers.

    Derived, not stored: the conversation up to the summary's `covered_last`, without the base
    prompt, summary messages, error results the pipeline made up and the pinned task (it stays
    in the window). A message the window dropped while its summary was skipped counts too: it
    is out of the prompt for good, and removal archives it first. Empty once `covered_last`
    left the state (everything up to it was removed).
    """
    summary = (ledger or {}).get("summary") or {}
    last = summary.get("covered_last")
    if not isinstance(last, str) or not last:
        return []
    end = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].id == last), None)
    if end is None:
        return []
    pin = ((ledger or {}).get("window") or {}).get("pin_id")
    _, _, history = split_base(messages[: end + 1])
    return [
        m.id
        for m in history
        if m.id and m.id != pin and not is_summary_message(m) and not get_tag(m).get("repair")
    ]


def record_dump_index(
    ledger: ContextLedger | dict[str, Any], spilled: Sequence[str], index_ref: str
) -> None:
    """The summary names `index_ref` instead of the `spilled` dump refs (now listed there)."""
    target: dict[str, Any] = ledger  # type: ignore[assignment]
    summary = dict(target.get("summary") or {})
    gone = set(spilled)
    summary["dump_refs"] = [r for r in summary.get("dump_refs", []) if r not in gone]
    if summary.get("unlisted"):
        summary["unlisted"] = [r for r in summary["unlisted"] if r not in gone]
    summary["dump_index"] = index_ref
    target["summary"] = summary


def adopt_summary(ledger: ContextLedger, text: str | None, quotes: Sequence[str] = ()) -> bool:
    """Adopt a summary found in the history (a `<summary>` message) when the ledger has none.

    `text` and `quotes` are the message's summary text and quoted tool-output lines, taken
    apart by the caller (`langgraph_ctx.prompt.render.split_summary_body`), so the summary is
    shown as it was: its labelled block once, never escaped into the text.
    Returns whether it was adopted: a ledger that already holds a summary text keeps it.
    """
    if text is None or (ledger.get("summary") or {}).get("text"):
        return False
    summary: SummaryEntry = {
        "text": text,
        "covered": 0,
        "covered_last": None,
        "dump_refs": [],
        "source": "input",
        "updates": 0,
    }
    if quotes:
        summary["quotes"] = list(quotes)
    ledger["summary"] = summary
    return True


def add_dump_ref(ledger: ContextLedger | dict[str, Any], ref: str, *, listed: bool = True) -> None:
    """Name one more insurance dump in the summary (a copy: the old summary dict is kept).

    `listed=False` (a removal span, whose summarized messages a listed dump holds too) keeps
    it out of the summary message, so the prompt does not change after a removal.
    """
    target: dict[str, Any] = ledger  # type: ignore[assignment]
    summary = dict(target.get("summary") or {})
    summary["dump_refs"] = [*summary.get("dump_refs", []), ref]
    if not listed:
        summary["unlisted"] = [*summary.get("unlisted", []), ref]
    target["summary"] = summary


DUMP_REFS_KEPT = 1
"""Insurance dumps the summary message names: the newest one (a reference costs about 45 tokens
in every prompt; figures in docs/benchmarks.md). When a summary lands, a build with an
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


def _is_str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)
