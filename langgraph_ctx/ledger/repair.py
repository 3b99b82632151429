"""Reading a persisted ledger: every part of the wrong shape is left out and said so.

The ledger sits in graph state where `update_state`, a migration or a hand edit can change it;
`repair_ledger` loads it with one shape check per key (`_REPAIRS`), and `merge_ledger` is the
reducer of its graph channel.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Mapping
from typing import Any

from langgraph_ctx.errors import ConfigError, shorten
from langgraph_ctx.ledger.schema import LEDGER_KEYS, ContextLedger, empty_ledger


def load_ledger(state: Mapping[str, Any] | None) -> ContextLedger:
    """A deep copy of `state` filled with defaults; the input is never mutated.

    Parts of the wrong shape are left out (see `repair_ledger`, which also says what).
    """
    return repair_ledger(state)[0]


def repair_ledger(state: Mapping[str, Any] | None) -> tuple[ContextLedger, list[str]]:
    """Load a persisted ledger, leaving out every part that does not have the ledger's shape.

    The ledger is written by the pipeline, but it sits in graph state where `update_state`, a
    migration or a hand edit can change it. Nothing in it is the only copy of a message (the
    state and the archive hold those), so a damaged part is dropped and rebuilt by the next
    edits: a pruned or compacted entry of the wrong shape shows its message whole again, a
    broken window shows the whole history to the budget again. Unknown keys are ignored.

    Returns:
        The ledger (a deep copy) and one line per part left out, for the report.

    Raises:
        ConfigError: `state` is not a mapping at all.
    """
    ledger = empty_ledger()
    repairs: list[str] = []
    if state is None:
        return ledger, repairs
    if not isinstance(state, Mapping):
        msg = (
            f"the context ledger must be a dict (BuildResult.state, state['context_ledger']), got "
            f"{type(state).__name__} {shorten(state)}; pass the state the previous build "
            "returned, or None to start a fresh ledger"
        )
        raise ConfigError(msg)
    for key in LEDGER_KEYS:
        value = state.get(key)
        if value is None:
            continue
        fixed = _REPAIRS[key](value, repairs)
        if fixed is not None:
            ledger[key] = copy.deepcopy(fixed)  # type: ignore[literal-required]
    return ledger, repairs


def merge_ledger(left: dict[str, Any] | None, right: dict[str, Any] | None) -> dict[str, Any]:
    """LangGraph reducer for the ledger channel: keys in `right` replace those in `left`.

    Raises:
        ConfigError: An update that is not a dict (e.g. `update_state` with a string).
    """
    for side in (left, right):
        if side is not None and not isinstance(side, Mapping):
            msg = (
                f"the 'context_ledger' channel holds the ledger, a dict, but got "
                f"{type(side).__name__} {shorten(side)}; write a dict such as "
                "BuildResult.state, or {} to reset it"
            )
            raise ConfigError(msg)
    merged = dict(left or {})
    merged.update(right or {})
    return merged


def _dropped(key: str, value: Any, repairs: list[str], why: str = "") -> None:
    """Note a ledger part of the wrong shape, left out (`why`: how it comes back)."""
    repairs.append(
        f"ledger[{key!r}]: malformed {shorten(value)}; dropped" + (f" ({why})" if why else "")
    )


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _optional_str(value: Any) -> bool:
    return value is None or isinstance(value, str)


def _str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _entries(
    key: str, value: Any, repairs: list[str], fields: Mapping[str, Callable[[Any], bool]]
) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        repairs.append(
            f"ledger[{key!r}]: expected a dict of entries by message id, got "
            f"{type(value).__name__} {shorten(value)}; dropped"
        )
        return {}
    kept: dict[str, Any] = {}
    for mid, entry in value.items():
        ok = isinstance(mid, str) and isinstance(entry, Mapping)
        ok = ok and all(name not in entry or check(entry[name]) for name, check in fields.items())
        if ok and key == "compacted":
            ok = isinstance(entry.get("ref"), str)  # a compacted entry without its ref is void
        if ok:
            kept[mid] = entry
        else:
            repairs.append(
                f"ledger[{key!r}][{shorten(mid, 40)}]: malformed entry "
                f"{shorten(entry)}; dropped (the message shows whole)"
            )
    return kept


def _pruned(value: Any, repairs: list[str]) -> Any:
    fields = {"tool": _is_str, "chars": _is_int, "ref": _is_str}
    return _entries("pruned", value, repairs, fields)


def _compacted(value: Any, repairs: list[str]) -> Any:
    fields = {
        "ref": _is_str,
        "tool": _is_str,
        "chars": _is_int,
        "input": _is_str,
        "preview": _is_str,
        "lines": _is_int_list,
        "max_arg": _is_int,
    }
    return _entries("compacted", value, repairs, fields)


def _is_int_list(value: Any) -> bool:
    return isinstance(value, list) and all(_is_int(v) for v in value)


def _is_str(value: Any) -> bool:
    return isinstance(value, str)


def _window(value: Any, repairs: list[str]) -> Any:
    ok = isinstance(value, Mapping) and all(
        _optional_str(value.get(name)) for name in ("start_id", "pin_id")
    )
    if not ok:
        repairs.append(
            f"ledger['window']: malformed {shorten(value)}; dropped (the whole "
            "history is shown to the budget again)"
        )
        return {}
    return value


def _summary(value: Any, repairs: list[str]) -> Any:
    if isinstance(value, str):  # the text alone: keep it
        repairs.append("ledger['summary']: a bare string; kept as the summary text")
        return {"text": value, "covered": 0, "dump_refs": [], "source": "input", "updates": 0}
    if not isinstance(value, Mapping):
        repairs.append(
            f"ledger['summary']: expected a dict, got {type(value).__name__} "
            f"{shorten(value)}; dropped"
        )
        return None
    fixed = dict(value)
    if "covered_ids" in fixed:  # a ledger written before the summary was bounded: migrate
        old = fixed.pop("covered_ids")
        ids = [v for v in old if isinstance(v, str) and v] if isinstance(old, list) else []
        if isinstance(old, list) and len(ids) != len(old):
            repairs.append(
                f"ledger['summary']['covered_ids']: {len(old) - len(ids)} item(s) that are not "
                "strings; left out (the others are kept)"
            )
        fixed.setdefault("covered", len(ids))
        fixed.setdefault("covered_last", ids[-1] if ids else None)
    defaults: dict[str, tuple[Callable[[Any], bool], Any]] = {
        "text": (_is_str, ""),
        "covered": (_is_int, 0),
        "covered_last": (_optional_str, None),
        "dump_refs": (_str_list, []),
        "unlisted": (_str_list, []),
        "dump_index": (_optional_str, None),
        "source": (_is_str, "input"),
        "updates": (_is_int, 0),
        "quotes": (_str_list, []),
    }
    items = fixed.get("dump_refs")  # keep every good ref of a damaged list
    if isinstance(items, list) and not _str_list(items):
        fixed["dump_refs"] = [v for v in items if isinstance(v, str)]
        repairs.append(
            f"ledger['summary']['dump_refs']: {len(items) - len(fixed['dump_refs'])} item(s) "
            "that are not strings; left out (the others are kept)"
        )
    for name, (check, default) in defaults.items():
        if name in fixed and not check(fixed[name]):
            repairs.append(
                f"ledger['summary'][{name!r}]: malformed {shorten(fixed[name])}; "
                f"reset to {default!r}"
            )
            fixed[name] = default
    if not fixed.get("text") and not fixed.get("dump_refs") and not fixed.get("dump_index"):
        return None
    return fixed


def _hint(value: Any, repairs: list[str]) -> Any:
    ok = isinstance(value, Mapping) and isinstance(value.get("text", ""), str)
    ok = ok and all(_optional_str(value.get(n)) for n in ("dump_ref", "after_id"))
    ok = ok and (value.get("cleared_ids") is None or _str_list(value.get("cleared_ids")))
    ok = ok and (value.get("prompt_tokens") is None or _is_int(value.get("prompt_tokens")))
    return value if ok else _dropped("hint", value, repairs)


def _entities(value: Any, repairs: list[str]) -> Any:
    ok = isinstance(value, Mapping) and (
        value.get("values") is None or isinstance(value.get("values"), Mapping)
    )
    ok = ok and all(_optional_str(value.get(n)) for n in ("last_input_id", "error"))
    return (
        value
        if ok
        else _dropped("entities", value, repairs, "extracted again at the next user input")
    )


def _last_report(value: Any, repairs: list[str]) -> Any:
    ok = isinstance(value, Mapping) and isinstance(value.get("decisions", []), list)
    return value if ok else _dropped("last_report", value, repairs)


def _is_ratio(value: Any) -> bool:
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )


def _is_scale(value: Any) -> bool:
    return _is_ratio(value) or ((_is_int(value) or isinstance(value, float)) and value == 0)


def _parts(value: Any) -> bool:
    """A ratio or raw estimate per part of the estimate (`ApproximateCounter.raw_parts`)."""
    return isinstance(value, Mapping) and all(
        isinstance(k, str) and _is_scale(v) for k, v in value.items()
    )


def _observation(value: Any) -> bool:
    return (
        isinstance(value, Mapping)
        and _parts(value.get("parts"))
        and _is_int(value.get("reported"))
        and value["reported"] > 0
        and (value.get("estimated") is None or _is_int(value["estimated"]))
    )


def _calibration(value: Any, repairs: list[str]) -> Any:
    # Two shapes: ratios per part (`ratios`, `seen`), or, written before them, one `ratio`
    # with its `samples`; both read.
    ok = isinstance(value, Mapping) and _is_scale(value.get("ratio", 1.0))
    samples = value.get("samples", []) if ok else None
    ok = ok and isinstance(samples, list) and all(_is_ratio(v) for v in samples)
    ok = ok and (value.get("ratios") is None or _parts(value["ratios"]))
    seen = value.get("seen", []) if ok else None
    ok = ok and isinstance(seen, list) and all(_observation(s) for s in seen)
    pending = value.get("pending") if ok else None
    ok = ok and (
        pending is None
        or (
            isinstance(pending, Mapping)
            and _optional_str(pending.get("after_id"))
            and _is_int(pending.get("tokens"))
            and _is_scale(pending.get("ratio"))
            and (pending.get("parts") is None or _parts(pending["parts"]))
        )
    )
    return (
        value
        if ok
        else _dropped("calibration", value, repairs, "learned again from the next replies")
    )


def _ahead(value: Any, repairs: list[str]) -> Any:
    ok = isinstance(value, Mapping) and all(
        isinstance(value.get(n), str) for n in ("start_id", "digest")
    )
    ok = ok and all(_optional_str(value.get(n)) for n in ("pin_id", "started"))
    ok = ok and all(_is_int(value.get(n, 0)) for n in ("count", "tokens", "due"))
    why = "the summary is prepared again, or made when the trigger is reached"
    return value if ok else _dropped("ahead", value, repairs, why)


def _called(value: Any, repairs: list[str]) -> Any:
    window = value.get("window") if isinstance(value, Mapping) else None
    ok = (
        isinstance(value, Mapping) and _is_int(value.get("added", 0)) and value.get("added", 0) >= 0
    )
    ok = ok and (window is None or (_is_int(window) and window > 0))
    ok = ok and isinstance(value.get("recall_unbound", False), bool)
    model = value.get("model") if ok else None
    ok = ok and (
        model is None
        or (isinstance(model, list) and all(x is None or isinstance(x, str) for x in model))
    )
    return value if ok else _dropped("called", value, repairs, "learned again from the next call")


def _growth(value: Any, repairs: list[str]) -> Any:
    if value is None or (_is_int(value) and value >= 0):
        return value
    return _dropped("growth", value, repairs, "learned again from the next calls")


_REPAIRS: dict[str, Callable[[Any, list[str]], Any]] = {
    "pruned": _pruned,
    "compacted": _compacted,
    "window": _window,
    "summary": _summary,
    "hint": _hint,
    "entities": _entities,
    "last_report": _last_report,
    "calibration": _calibration,
    "ahead": _ahead,
    "called": _called,
    "growth": _growth,
}
