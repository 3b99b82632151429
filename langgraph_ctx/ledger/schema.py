"""The ledger's shape: one `TypedDict` per key, and the empty ledger.

Everything here is dicts, lists, strings and numbers, so the ledger sits in graph state under
any checkpointer (see `langgraph_ctx.ledger`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict, cast


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
    one (older ones are listed in the archive, `dump_index`; see `langgraph_ctx.ledger.summary`).
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
    """What the provider's real usage taught about the counter (see `tokens._calibration`).

    A ledger written before ratios per part holds `ratio` and `samples` only; it is read as
    `ratio` for every part until the next observation.
    """

    ratio: float
    """The ratio the newest observed prompt is counted at, all parts together (for reading)."""
    ratios: dict[str, float]
    """The ratio each part of the estimate is counted at (`tokens._ratios.applied`)."""
    seen: list[dict[str, Any]]
    """The newest observations: `{"parts": raw estimate by part, "reported": the provider's
    count, "estimated": the package's}`."""
    samples: list[float]
    """Older ledgers: the newest observations as one ratio each."""
    observations: int
    last_estimated: int | None
    last_reported: int | None
    pending: dict[str, Any] | None


class AheadEntry(TypedDict, total=False):
    """A summary being prepared ahead of the trigger (see `langgraph_ctx.strategies.ahead`).

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
    """Not read: older ledgers hold it (a count-down of a cut deferred at the trigger)."""
    after: bool
    """The span ends with `start_id`'s message (then the newest): the window will start
    after it."""


class CalledEntry(TypedDict, total=False):
    """What the calls the model actually received taught (see `langgraph_ctx.graph.guard`).

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
    model: list[str | None]
    """The model with the smallest window (class, provider, model name): builds are for it."""


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


LEDGER_KEYS: tuple[str, ...] = tuple(ContextLedger.__annotations__)
"""The ledger's keys, in the order `ContextLedger` declares them (the one list of them)."""

_EMPTY_MAPS = frozenset({"pruned", "compacted", "window"})
"""The keys an empty ledger holds as an empty dict (no entries, no window); the others are None."""


def empty_ledger() -> ContextLedger:
    """A ledger with nothing recorded: every key of `ContextLedger`, empty or None."""
    return cast(ContextLedger, {key: {} if key in _EMPTY_MAPS else None for key in LEDGER_KEYS})


def has_archived(ledger: Mapping[str, Any] | None) -> bool:
    """Whether anything of the thread has left the prompt for the archive, by its ledger.

    An output excerpted or pruned, a turn shortened, a summary's dump, a hint rebuild: from
    then on there is something to search (`search_history` is worth its schema).
    """
    ledger = ledger or {}
    summary = ledger.get("summary") or {}
    dumps = summary.get("dump_refs") or summary.get("dump_index")
    return bool(ledger.get("compacted") or ledger.get("pruned") or dumps or ledger.get("hint"))
