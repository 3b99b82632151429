"""The ledger's other writes: window, hint, placeholders, entities, report, calibration.

With `langgraph_ctx.ledger.summary`, the only code that changes a ledger.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from langgraph_ctx.ledger.schema import (
    AheadEntry,
    CalledEntry,
    CompactedEntry,
    ContextLedger,
    EntitiesEntry,
    PrunedEntry,
    WindowEntry,
)


def set_hint(
    ledger: ContextLedger,
    *,
    text: str,
    cleared_ids: list[str],
    dump_ref: str | None,
    prompt_tokens: int,
    after_id: str | None,
) -> None:
    """Record the compression hint of a rebuild (the next prompts carry `text`)."""
    ledger["hint"] = {
        "text": text,
        "cleared_ids": cleared_ids,
        "dump_ref": dump_ref,
        "prompt_tokens": prompt_tokens,
        "after_id": after_id,
    }


def set_window(
    ledger: ContextLedger,
    start_id: str | None = None,
    *,
    pin_id: str | None = None,
    task_dropped: bool = False,
) -> None:
    """Record where the prompt's window starts; no `start_id` shows the whole history again."""
    if start_id is None:
        ledger["window"] = {}
        return
    window: WindowEntry = {"start_id": start_id, "pin_id": pin_id}
    if task_dropped:
        window["task_dropped"] = True
    ledger["window"] = window


def record_pruned(ledger: ContextLedger, message_id: str, entry: PrunedEntry) -> None:
    """Show a tool output as a pruned placeholder."""
    ledger["pruned"][message_id] = entry


def record_compacted(ledger: ContextLedger, message_id: str, entry: CompactedEntry) -> None:
    """Show a tool output as its compacted stand-in (no longer as a pruned placeholder)."""
    ledger["compacted"][message_id] = entry
    ledger["pruned"].pop(message_id, None)


def forget_entries(ledger: ContextLedger | dict[str, Any], ids: Collection[str]) -> None:
    """Drop the pruned and compacted entries of messages that left the state.

    Their archived copies stay indexed by id, so `recall` still finds them. Works on a
    `ContextLedger` or on a plain ledger dict (new entry dicts; the old ones are kept).
    """
    target: dict[str, Any] = ledger  # type: ignore[assignment]
    for key in ("pruned", "compacted"):
        target[key] = {k: v for k, v in (target.get(key) or {}).items() if k not in ids}


def record_extraction(
    ledger: ContextLedger,
    *,
    last_input_id: str | None,
    values: Mapping[str, Any] | None = None,
    error: str | None = None,
) -> EntitiesEntry:
    """Record an entity extraction at user input `last_input_id`.

    On success (`error` None) `values` replace the entity state; on failure the previous
    values are kept and the error is recorded. Either way the input is not extracted again.
    """
    entities: Any = dict(ledger.get("entities") or {})
    if error is None:
        entities.update(values=dict(values or {}), last_input_id=last_input_id, error=None)
    else:
        entities.update(last_input_id=last_input_id, error=error)
    ledger["entities"] = entities
    return entities  # type: ignore[no-any-return]


def set_last_report(ledger: ContextLedger | dict[str, Any], report: dict[str, Any]) -> None:
    """Store a report (its `to_dict()` form) as the ledger's last report."""
    target: dict[str, Any] = ledger  # type: ignore[assignment]
    target["last_report"] = report


def record_calibration(
    ledger: ContextLedger, *, learned: Mapping[str, Any], estimated: int, reported: int
) -> None:
    """Record one observation of the provider's prompt size against our estimate.

    `learned` holds what it taught (`ratio`, `ratios`, `seen`: see `CalibrationEntry`); the
    prompt waiting for its reply is then forgotten.
    """
    entry: Any = dict(ledger.get("calibration") or {})
    entry.update(
        learned,
        observations=int(entry.get("observations", 0)) + 1,
        last_estimated=estimated,
        last_reported=reported,
        pending=None,
    )
    ledger["calibration"] = entry


def set_calibration_learned(ledger: ContextLedger, learned: Mapping[str, Any]) -> None:
    """Replace what the observations taught (e.g. after a provider overflow refuted some)."""
    entry: Any = dict(ledger.get("calibration") or {})
    entry.update(learned)
    ledger["calibration"] = entry


def set_calibration_pending(
    ledger: ContextLedger,
    *,
    after_id: str | None,
    tokens: int,
    ratio: float,
    parts: Mapping[str, float] | None = None,
) -> None:
    """Remember the prompt just built, so the reply's usage can be checked against it.

    `parts` is the prompt's raw estimate by part (`ApproximateCounter.raw_parts`), what the
    reply's count is compared with; `tokens` is the estimate the build counted with.
    """
    entry: Any = dict(ledger.get("calibration") or {})
    entry.setdefault("ratio", 1.0)
    pending: dict[str, Any] = {"after_id": after_id, "tokens": tokens, "ratio": ratio}
    if parts is not None:
        pending["parts"] = dict(parts)
    entry["pending"] = pending if after_id else None
    ledger["calibration"] = entry


def set_ahead(ledger: ContextLedger, entry: AheadEntry | None) -> None:
    """Record the summary being prepared ahead (None: nothing is)."""
    ledger["ahead"] = entry


def set_called(ledger: ContextLedger | dict[str, Any], entry: CalledEntry | None) -> None:
    """Record what the model calls received (see `CalledEntry`); None forgets it."""
    ledger["called"] = entry


def record_growth(ledger: ContextLedger, added: int) -> None:
    """Fold the tokens one call added to the prompt into the moving average (weight 1/5)."""
    old = ledger.get("growth")
    ledger["growth"] = added if old is None else round(0.8 * old + 0.2 * added)
