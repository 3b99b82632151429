"""The token budget and the `context_cost` report every build produces.

The report is plain data (`to_dict` / `from_dict` round-trip through JSON), so it can sit in
graph state under any checkpointer and on an AI message's `response_metadata["context_cost"]`
(`attach_report` puts its brief form there).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from langchain_core.messages import AIMessage

from langgraph_ctx.checks import check_bool, check_int, check_list, check_number, check_str
from langgraph_ctx.errors import ConfigError, InputError, shorten
from langgraph_ctx.ledger.edits import set_last_report
from langgraph_ctx.ledger.schema import ContextLedger
from langgraph_ctx.tokens._calibration import reported_input_tokens

DecisionKind = Literal[
    "drop_memory",
    "prune",
    "compact",
    "shrink",
    "auto_compact",
    "summarize",
    "extract",
    "rebuild",
    "repair",
    "skip",
    "error",
    "prepare",
]


@dataclass(frozen=True, kw_only=True, slots=True)
class ContextBudget:
    """How many tokens a prompt may use, and when to edit it.

    `limit = context_window_tokens - reserved_output_tokens`, never below 0. Edits start when a
    prompt passes `trigger * limit` and cut down to `target * limit`, so the prompt prefix stays
    byte-identical (and the provider's prompt cache warm) for many calls between edits.

    Example:
        >>> ContextBudget(context_window_tokens=32_000, reserved_output_tokens=4_000).limit
        28000
    """

    context_window_tokens: int
    """The model's input window in tokens."""
    reserved_output_tokens: int = 0
    """Tokens kept free for the reply."""
    trigger: float = 0.9
    """Fraction of the limit above which the pipeline edits the prompt (high-water mark)."""
    target: float = 0.15
    """Fraction the pipeline cuts down to once triggered (low-water mark): of what the limit
    leaves above the fixed part of the prompt (`targets_above_fixed`)."""
    summary_target: float = 0.05
    """Fraction of the limit the window cuts down to when what leaves it is summarized
    (auto-compaction): the summary carries the rest, and a short prompt is cheap for many
    calls until the next edit."""
    targets_above_fixed: bool = True
    """Read `target` and `summary_target` as shares of what the limit leaves above the fixed
    part of the prompt (the base system prompt, tool schemas, the running summary and the
    pinned task, as the build found them) instead of shares of the whole limit. In a small
    window a long task and system prompt can take most of a target, and the cut then empties
    the history on every edit."""
    cache_price: float | None = 0.1
    """What a cached prompt token costs next to an uncached one (providers charge about 0.1).
    With it, edits start before `trigger` when a shorter cycle costs less over a long run: an
    edit makes the next call re-read the prompt after the edit point uncached (about the
    target), while every call re-reads the cached prompt at this price. With the prompt
    growing by g tokens a call (a moving average kept in the ledger), the cycle that costs
    least runs from the target T up to T + sqrt(2 x g x T / cache_price); edits start there
    when that is under the trigger, but never below `trigger_floor`. None: always at the
    trigger."""
    trigger_floor: float = 0.7
    """Share of the limit below which `cache_price` never starts edits. The cheapest cycle
    in a large window is short (it would cut far below the trigger), and every early cut folds
    away outputs the agent may use next for a saving of cached tokens; in a small window the
    cheapest cycle already starts above it."""

    def __post_init__(self) -> None:
        check_int("context_window_tokens", self.context_window_tokens, example=32_000)
        check_int("reserved_output_tokens", self.reserved_output_tokens, example=0)
        check_number(
            "cache_price",
            self.cache_price,
            gt=0,
            le=1,
            optional=True,
            example=0.1,
            note="0.1 for providers that bill cached prompt tokens at a tenth",
        )
        for name, example in [
            ("trigger", 0.9),
            ("target", 0.15),
            ("summary_target", 0.05),
            ("trigger_floor", 0.7),
        ]:
            value = getattr(self, name)
            check_number(name, value, example=example, note="a fraction of the limit")
        check_bool("targets_above_fixed", self.targets_above_fixed)
        if not 0 <= self.trigger_floor <= 1:
            msg = f"need 0 <= trigger_floor <= 1, got {self.trigger_floor}; e.g. 0.7 (0: no floor)"
            raise ConfigError(msg)
        if not 0 < self.summary_target <= self.trigger or not 0 < self.target <= self.trigger <= 1:
            msg = (
                "need 0 < target <= trigger <= 1 and 0 < summary_target <= trigger, got "
                f"target={self.target}, summary_target={self.summary_target}, "
                f"trigger={self.trigger}; e.g. trigger=0.9, target=0.25, summary_target=0.1"
            )
            raise ConfigError(msg)

    @property
    def limit(self) -> int:
        """Tokens the prompt may use: window minus reserved output, never below 0."""
        return max(0, self.context_window_tokens - self.reserved_output_tokens)

    @property
    def trigger_tokens(self) -> int:
        """Prompt size above which edits start."""
        return int(self.limit * self.trigger)

    @property
    def target_tokens(self) -> int:
        """Prompt size edits cut down to."""
        return int(self.limit * self.target)

    @property
    def summary_target_tokens(self) -> int:
        """Prompt size the window cuts down to when it summarizes what leaves."""
        return int(self.limit * self.summary_target)


@dataclass(kw_only=True, slots=True)
class Decision:
    """One step the pipeline took (or refused to take), with its effect in tokens."""

    kind: DecisionKind
    """What was done: drop_memory, prune, compact, shrink, auto_compact, summarize, ..."""
    tokens_before: int
    """Prompt tokens before the step."""
    tokens_after: int
    """Prompt tokens after the step."""
    attempt: int | None = None
    """For pruning: the attempt number (1 before any shrink, then one per shrink)."""
    message_ids: list[str] = field(default_factory=list)
    """Messages the step touched."""
    detail: dict[str, Any] = field(default_factory=dict)
    """Anything else worth knowing (references, reasons, counts)."""

    @property
    def saved(self) -> int:
        """Tokens the step removed from the prompt."""
        return self.tokens_before - self.tokens_after


@dataclass(kw_only=True, slots=True)
class ContextCostReport:
    """What one build did: the limit, the final prompt size and every decision taken."""

    limit: int
    """The budget limit in tokens."""
    tokens: int
    """Tokens of the final prompt (or of the smallest prompt reached, on failure)."""
    tokens_in: int = 0
    """Tokens of the prompt as assembled before any edit."""
    messages_in: int = 0
    """Messages in the history handed to the build."""
    messages_out: int = 0
    """Messages in the prompt sent."""
    trigger: int | None = None
    """The prompt size above which this build would edit: the budget's trigger, or earlier
    where a shorter cycle costs less (`ContextBudget.cache_price`)."""
    decisions: list[Decision] = field(default_factory=list)
    """Steps taken, in order."""
    calibration_ratio: float = 1.0
    """The learned provider/estimate ratio `tokens` was scaled by (approximate counters): all
    parts of the estimate together, `tokens` over the raw estimate."""
    calibration_ratios: dict[str, float] | None = None
    """The learned ratio of each part of the estimate (text, tool calls, media, tool schemas,
    frame: `ApproximateCounter.raw_parts`); None when the counter is not calibrated or has
    learned nothing yet."""
    reported_tokens: int | None = None
    """The provider's own count of this prompt (`usage_metadata["input_tokens"]` of the
    reply), once the reply is in; compare with `tokens`, the package's estimate."""
    received_tokens: int | None = None
    """What the model received, counted at the call, when a middleware inside
    `ContextMiddleware` changed the request after the build (added a system prompt or tools,
    dropped tools, called another model); None when the model received the build as is."""
    ok: bool = True
    """False when the build raised (the report then travels on the error)."""
    error: str | None = None
    """Why the build failed."""

    def add(self, decision: Decision) -> Decision:
        """Append a decision and return it."""
        self.decisions.append(decision)
        return decision

    def record(
        self,
        kind: DecisionKind,
        *,
        tokens_before: int,
        tokens_after: int,
        attempt: int | None = None,
        message_ids: list[str] | None = None,
        detail: dict[str, Any] | None = None,
    ) -> Decision:
        """Record one step the build took (or refused to take) and return its decision."""
        return self.add(
            Decision(
                kind=kind,
                tokens_before=tokens_before,
                tokens_after=tokens_after,
                attempt=attempt,
                message_ids=message_ids if message_ids is not None else [],
                detail=detail if detail is not None else {},
            )
        )

    def retract(self, decision: Decision) -> None:
        """Take back a recorded decision whose step the build undid."""
        self.decisions.remove(decision)

    def fail(self, error: str) -> None:
        """Mark the build failed and say why (the report then travels on the error)."""
        self.ok, self.error = False, error

    def kinds(self) -> list[str]:
        """The decision kinds in order (handy in tests and tables)."""
        return [d.kind for d in self.decisions]

    def edits(self) -> list[Decision]:
        """Decisions that changed the prompt (an empty pruning attempt or a skip did not)."""
        return [
            d
            for d in self.decisions
            if d.kind not in ("skip", "error")
            and (d.message_ids or d.tokens_before != d.tokens_after)
        ]

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ContextCostReport:
        """Rebuild a report from `to_dict` output (or from a `brief_report`, less its detail).

        Keys a report does not have are ignored, so a brief report reads back too: its
        decisions then name no messages (it only counts them) and carry no detail.

        Raises:
            InputError: `data` is not shaped as a report (`check_report`).
        """
        check_report(data)
        known = {f.name for f in dataclasses.fields(cls)}
        fields = {k: v for k, v in data.items() if k in known}
        names = {f.name for f in dataclasses.fields(Decision)}
        fields["decisions"] = [
            Decision(**{k: v for k, v in d.items() if k in names})
            for d in fields.get("decisions", [])
        ]
        return cls(**fields)

    def summary_line(self) -> str:
        """One line for logs: `tokens/limit (kinds)`."""
        kinds = ", ".join(self.kinds()) or "no edits"
        return f"{self.tokens}/{self.limit} tokens ({kinds})"


_COUNTS = ("limit", "tokens", "tokens_in", "messages_in", "messages_out")
"""Report fields that are token or message counts (`limit` and `tokens` always present)."""
_OPTIONAL_COUNTS = ("trigger", "reported_tokens", "received_tokens")
"""Report fields that are counts or None."""


def check_report(data: Any, *, where: str = "a context_cost report") -> Mapping[str, Any]:
    """`data`, after checking it has a report's shape (`to_dict` or `brief_report` output).

    A report is read back from graph state or an AI message's `response_metadata`, which a
    hand edit, a migration or a crafted checkpoint can change: every count must be a whole
    number >= 0 (`inf`, `nan` or `"12"` is none), `calibration_ratio` a finite number > 0,
    `ok` a flag, and `decisions` a list of dicts each with a string `kind` and whole token
    counts. Keys a report does not have are not looked at (`from_dict` ignores them).

    Args:
        data: The report as read.
        where: Where it was read, for the message.

    Returns:
        `data`, unchanged.

    Raises:
        InputError: One line naming the first field of the wrong kind and its value.
    """
    try:
        _check_report_fields(data)
    except ConfigError as exc:
        msg = (
            f"{where} is not a report langgraph-ctx wrote: {exc}; the state was edited or "
            "written by something else: pass a thread an agent with ContextMemory recorded"
        )
        raise InputError(msg) from None
    checked: Mapping[str, Any] = data
    return checked


def _check_report_fields(data: Any) -> None:
    if not isinstance(data, Mapping):
        msg = f"it must be a dict, got {type(data).__name__} {shorten(data)}"
        raise ConfigError(msg)
    for name in _COUNTS:
        check_int(name, data.get(name, None if name in ("limit", "tokens") else 0))
    for name in _OPTIONAL_COUNTS:
        check_int(name, data.get(name), optional=True)
    check_number("calibration_ratio", data.get("calibration_ratio", 1.0), gt=0)
    ratios = data.get("calibration_ratios")
    if ratios is not None:
        if not isinstance(ratios, Mapping):
            msg = (
                f"calibration_ratios must be a dict, got {type(ratios).__name__} {shorten(ratios)}"
            )
            raise ConfigError(msg)
        for part, ratio in ratios.items():
            check_number(f"calibration_ratios[{part!r}]", ratio, gt=0)
    check_bool("ok", data.get("ok", True))
    check_str("error", data.get("error"), optional=True, empty=True)
    decisions = data.get("decisions", [])
    check_list("decisions", decisions, "dicts, one per decision", of=dict)
    for n, decision in enumerate(decisions):
        check_str(f"decisions[{n}]['kind']", decision.get("kind"))
        for name in ("tokens_before", "tokens_after"):
            check_int(f"decisions[{n}][{name!r}]", decision.get(name))
        check_int(f"decisions[{n}]['attempt']", decision.get("attempt"), optional=True)
        check_int(f"decisions[{n}]['messages']", decision.get("messages", 0))
        ids = decision.get("message_ids", [])
        check_list(f"decisions[{n}]['message_ids']", ids, "message ids", of=str)
        detail = decision.get("detail", {})
        if not isinstance(detail, Mapping):
            msg = (
                f"decisions[{n}]['detail'] must be a dict, got {type(detail).__name__} "
                f"{shorten(detail)}"
            )
            raise ConfigError(msg)


BRIEF_KEYS = (
    "limit",
    "tokens",
    "tokens_in",
    "messages_in",
    "messages_out",
    "calibration_ratio",
    "reported_tokens",
    "ok",
    "error",
)
"""The report fields a brief report keeps as they are."""

BRIEF_IF_SET = ("received_tokens",)
"""Report fields a brief report keeps only when they are set (most builds leave them None)."""


def brief_report(report: Mapping[str, Any]) -> dict[str, Any]:
    """The short form of a report (its `to_dict()` form) that each AI message carries.

    Sizes, `ok` and `error` as they are, and per decision its `kind`, `attempt`, tokens before
    and after and how many messages it named (`messages`), without the ids and the detail:
    LangGraph writes every message into every checkpoint, so the full report lives once, in
    the ledger (`state["context_ledger"]["last_report"]`, and `ContextMemory.get_reports`
    for every build of a thread). `ContextCostReport.from_dict` reads a brief report too.
    """
    brief = {key: report[key] for key in BRIEF_KEYS if key in report}
    brief.update({key: report[key] for key in BRIEF_IF_SET if report.get(key) is not None})
    brief["decisions"] = [
        {
            "kind": d.get("kind"),
            "attempt": d.get("attempt"),
            "tokens_before": d.get("tokens_before"),
            "tokens_after": d.get("tokens_after"),
            "messages": len(d.get("message_ids") or []),
        }
        for d in report.get("decisions") or []
        if isinstance(d, Mapping)
    ]
    brief["brief"] = True
    return brief


def append_to_ledger_report(ledger: ContextLedger | dict[str, Any], decision: Decision) -> None:
    """Add a decision made after the build (a rebuild, a removal) to the ledger's last report.

    The report a build stored is plain data by then; the decision joins its list, so the
    report the thread keeps tells the whole turn.
    """
    report = dict(ledger.get("last_report") or {})
    report["decisions"] = [*report.get("decisions", []), asdict(decision)]
    set_last_report(ledger, report)


REPORT_KEY = "context_cost"
"""Key of the report in an AI message's `response_metadata`."""


def attach_report(message: AIMessage, report: Mapping[str, Any]) -> AIMessage:
    """A copy of `message` carrying the report in `response_metadata["context_cost"]`.

    The message carries the brief form (`brief_report`: sizes and one line per
    decision); the full report is the ledger's `last_report`. The report gains
    `reported_tokens`, the provider's count of the prompt from the reply's `usage_metadata`,
    next to the package's estimate `tokens`.
    """
    report = brief_report(report)
    reported = reported_input_tokens(message)
    if reported is not None:
        report["reported_tokens"] = reported
    metadata = {**message.response_metadata, REPORT_KEY: report}
    return message.model_copy(update={"response_metadata": metadata})
