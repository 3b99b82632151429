"""The context ledger: everything the pipeline keeps between calls, as JSON-able data.

It lives in graph state (`ContextState["context_ledger"]`), keyed by message ids and never by list
positions, so it survives every checkpointer, resume, replay and fork. Custom classes in
checkpointed state trip `LANGGRAPH_STRICT_MSGPACK`; this is dicts, lists, strings and numbers.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, TypedDict

from langgraph_ctx.errors import ConfigError, shorten


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
    lines: list[int]
    """Line numbers of the output shown as its excerpt (instead of the preview)."""
    max_arg: int
    """A shortened model turn: string tool-call arguments are cut to this many characters."""


class SummaryEntry(TypedDict, total=False):
    """The running summary of what left the prompt window.

    Its size does not grow with the thread: it names the newest message it covers, not each
    one (`covered_ids` derives them from the state), and the newest insurance dumps, not each
    one (older ones are listed in the archive, `dump_index`; see `langgraph_ctx._dumps`).
    """

    text: str
    covered: int
    covered_last: str | None
    dump_refs: list[str]
    unlisted: list[str]
    dump_index: str | None
    source: str
    updates: int
    quotes: list[str]
    """Whole tool-output lines of what the summary covers that the agent used later."""


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


class CalibrationEntry(TypedDict, total=False):
    """What the provider's real usage taught about the counter (see `_calibration`)."""

    ratio: float
    samples: list[float]
    observations: int
    last_estimated: int | None
    last_reported: int | None
    pending: dict[str, Any] | None


class AheadEntry(TypedDict, total=False):
    """A summary being prepared ahead of the trigger (see `langgraph_ctx.ahead`).

    The span is what leaves the window when it moves to `start_id` (keeping `pin_id`); `digest`
    hashes the previous summary and the span's messages, so a prepared summary is used only
    for exactly what it was made from.
    """

    start_id: str
    pin_id: str | None
    digest: str
    count: int
    started: str | None
    tokens: int
    due: int


class CalledEntry(TypedDict, total=False):
    """What the calls the model actually received taught (see `langgraph_ctx._guard`).

    Middleware inside `ContextMiddleware` may change a request after the build: add a system
    prompt or tools, drop tools, call another model. The guard counts what the model received;
    the next builds leave room for it.
    """

    added: int
    """Tokens the inner middleware added to the last call of the built-for model (>= 0)."""
    window: int | None
    """The smallest window a model was called with, when smaller than the configured one."""
    recall_unbound: bool
    """The last call received no `recall` tool: placeholders must not tell the model to call it."""


class ContextLedger(TypedDict, total=False):
    """The JSON-able record the pipeline persists (all keys optional)."""

    pruned: dict[str, PrunedEntry]
    compacted: dict[str, CompactedEntry]
    window: WindowEntry
    summary: SummaryEntry | None
    hint: HintEntry | None
    entities: EntitiesEntry | None
    last_report: dict[str, Any] | None
    calibration: CalibrationEntry | None
    ahead: AheadEntry | None
    called: CalledEntry | None
    growth: int | None
    """Tokens a call adds to the prompt, a moving average (`ContextBudget.cache_price`)."""


LEDGER_KEYS = (
    "pruned",
    "compacted",
    "window",
    "summary",
    "hint",
    "entities",
    "last_report",
    "calibration",
    "ahead",
    "called",
    "growth",
)


def empty_ledger() -> ContextLedger:
    """A ledger with nothing recorded."""
    return ContextLedger(
        pruned={},
        compacted={},
        window={},
        summary=None,
        hint=None,
        entities=None,
        last_report=None,
        calibration=None,
        ahead=None,
        called=None,
        growth=None,
    )


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


# --- the writes (the only code that changes a ledger) ------------------------------------


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
    from langgraph_ctx.messages.base import is_summary_message, split_base
    from langgraph_ctx.messages.content import get_tag

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


def adopt_summary(ledger: ContextLedger, text: str | None) -> bool:
    """Adopt a summary found in the history (a `<summary>` message) when the ledger has none.

    Returns whether it was adopted: a ledger that already holds a summary text keeps it.
    """
    if text is None or (ledger.get("summary") or {}).get("text"):
        return False
    ledger["summary"] = {
        "text": text,
        "covered": 0,
        "covered_last": None,
        "dump_refs": [],
        "source": "input",
        "updates": 0,
    }
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
    ledger: ContextLedger, *, ratio: float, samples: list[float], estimated: int, reported: int
) -> None:
    """Record one observation of the provider's prompt size against our estimate."""
    entry: Any = dict(ledger.get("calibration") or {})
    entry.update(
        ratio=ratio,
        samples=list(samples),
        observations=int(entry.get("observations", 0)) + 1,
        last_estimated=estimated,
        last_reported=reported,
        pending=None,
    )
    ledger["calibration"] = entry


def set_calibration_samples(ledger: ContextLedger, *, ratio: float, samples: list[float]) -> None:
    """Replace the observations kept and the ratio they give (e.g. after a provider overflow)."""
    entry: Any = dict(ledger.get("calibration") or {})
    entry.update(ratio=ratio, samples=list(samples))
    ledger["calibration"] = entry


def set_calibration_pending(
    ledger: ContextLedger, *, after_id: str | None, tokens: int, ratio: float
) -> None:
    """Remember the prompt just built, so the reply's usage can be checked against it."""
    entry: Any = dict(ledger.get("calibration") or {})
    entry.setdefault("ratio", 1.0)
    entry["pending"] = (
        {"after_id": after_id, "tokens": tokens, "ratio": ratio} if after_id else None
    )
    ledger["calibration"] = entry


def set_ahead(ledger: ContextLedger, entry: AheadEntry | None) -> None:
    """Record the summary being prepared ahead (None: nothing is)."""
    ledger["ahead"] = entry


# --- shape checks (one per ledger key) ---------------------------------------------------


def set_called(ledger: ContextLedger | dict[str, Any], entry: CalledEntry | None) -> None:
    """Record what the model calls received (see `CalledEntry`); None forgets it."""
    ledger["called"] = entry


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


def _calibration(value: Any, repairs: list[str]) -> Any:
    ok = isinstance(value, Mapping) and _is_ratio(value.get("ratio", 1.0))
    samples = value.get("samples", []) if ok else None
    ok = ok and isinstance(samples, list) and all(_is_ratio(v) for v in samples)
    pending = value.get("pending") if ok else None
    ok = ok and (
        pending is None
        or (
            isinstance(pending, Mapping)
            and _optional_str(pending.get("after_id"))
            and _is_int(pending.get("tokens"))
            and _is_ratio(pending.get("ratio"))
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
    return value if ok else _dropped("called", value, repairs, "learned again from the next call")


def _growth(value: Any, repairs: list[str]) -> Any:
    if value is None or (_is_int(value) and value >= 0):
        return value
    return _dropped("growth", value, repairs, "learned again from the next calls")


def record_growth(ledger: ContextLedger, added: int) -> None:
    """Fold the tokens one call added to the prompt into the moving average (weight 1/5)."""
    old = ledger.get("growth")
    ledger["growth"] = added if old is None else round(0.8 * old + 0.2 * added)


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
