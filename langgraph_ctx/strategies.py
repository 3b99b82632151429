"""Pluggable strategies: one small protocol, plain config objects, buildable from JSON.

A strategy is an object with a `stage` number and `run(work)`, a generator that edits the
build's `Workspace` and may yield effects (archive writes, summarizer calls). The pipeline runs
strategies in stage order, with its own steps between them::

    10  EntityExtraction        every call (after a new user input)
    20  DynamicSummarization    every call (once history passes a threshold)
    25  (drop memory)           when the prompt is over the limit
    30  (prune, attempt 1)      when the prompt is over the trigger
    40  Compaction              when triggered: large tool outputs to the archive
    50  SlidingWindow           when triggered: shrink the window, prune again, auto-compact

Stages >= 40 run only once the prompt passed the trigger, and they cut down to the target.
Your own strategy needs only `stage` and `run`; `register_strategy` makes it buildable from a
dict config.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, runtime_checkable

from langchain_core.messages import BaseMessage, HumanMessage

from langgraph_ctx._assembly import is_summary_message
from langgraph_ctx._effects import Plan
from langgraph_ctx._workspace import Workspace
from langgraph_ctx.errors import ConfigError
from langgraph_ctx.messages import get_tag

STAGE_EXTRACT = 10
STAGE_DYNAMIC = 20
STAGE_DROP_MEMORY = 25
STAGE_PRUNE = 30
STAGE_COMPACT = 40
STAGE_WINDOW = 50
REDUCE_STAGES_FROM = STAGE_COMPACT


_SCALAR_TYPES: dict[str, type | tuple[type, ...]] = {
    "int": int,
    "bool": bool,
    "float": (int, float),
    "str": str,
}


def check_field_types(config: Any) -> None:
    """Refuse a strategy field whose value is not of its declared scalar type.

    Only plain `int`/`bool`/`float`/`str` fields (optionally `| None`) are checked; `True` is
    not a number here. Raises `ConfigError` with the field, the value and the type expected.
    """
    for f in dataclasses.fields(config):
        declared = str(f.type)
        options = [part.strip() for part in declared.split("|")]
        value = getattr(config, f.name)
        wanted = [o for o in options if o != "None"]
        if (value is None and "None" in options) or not all(o in _SCALAR_TYPES for o in wanted):
            continue
        if not any(
            isinstance(value, _SCALAR_TYPES[o]) and (o == "bool" or not isinstance(value, bool))
            for o in wanted
        ):
            msg = (
                f"{type(config).__name__}({f.name}={value!r}): {f.name} must be {declared}, "
                f"got {type(value).__name__}"
            )
            raise ConfigError(msg)


@runtime_checkable
class Strategy(Protocol):
    """What every strategy provides."""

    stage: ClassVar[int]
    """Where it runs in the pipeline (see the module docstring)."""

    def run(self, work: Workspace) -> Plan[None]:
        """Edit the workspace; yield effects for I/O."""
        ...


def summarize_span(work: Workspace, dropped: Sequence[BaseMessage], *, kind: str) -> Plan[bool]:
    """Insurance dump, then a running summary of `dropped` folded into the ledger.

    Nothing is summarized when only a previous summary would be; the report says why.
    Returns whether a summary was written.
    """
    # Error results the pipeline made up for unanswered calls are not history: not summarized,
    # not dumped.
    conversation = [
        m for m in dropped if not is_summary_message(m) and not get_tag(m).get("repair")
    ]
    if not conversation:
        work.decide(
            "skip", work.tokens, detail={"reason": "only the previous summary would be summarized"}
        )
        return False
    if work.tokens - work.cost(work.summary_message()) > work.budget.trigger_tokens:
        # The kept window alone is over the trigger: the next call would cut and summarize
        # again, and again (thrash). The messages stay in state, uncovered: nothing is lost.
        work.decide(
            "skip",
            work.tokens,
            message_ids=[m.id or "" for m in conversation],
            detail={"reason": "the kept window alone is over the trigger"},
        )
        return False
    summarize = work.resources.summarize
    if summarize is None:
        work.decide(kind, work.tokens, detail={"skipped": "no summarizer configured"})  # type: ignore[arg-type]
        return False
    dump_ref = None
    if work.resources.dump_messages is not None:
        try:
            dump_ref = yield work.resources.dump_messages(list(conversation))
        except Exception as exc:  # nothing is summarized without its insurance
            work.decide("skip", work.tokens, detail={"reason": f"insurance dump failed: {exc}"})
            return False
    previous = (work.ledger.get("summary") or {}).get("text")
    # The summarizer reads the originals, not placeholders: what it does not see is lost.
    outcome = yield summarize(list(conversation), previous)
    detail = {
        "dump_ref": dump_ref,
        "source": outcome.source,
        "model_calls": outcome.model_calls,
        "summarizer_input_tokens": outcome.input_tokens,
        "error": outcome.error,
    }
    text = work.fit_summary(outcome.text)
    if text is None:  # the messages stay in state, uncovered: nothing is lost
        detail["reason"] = "no room for a summary within the limit"
        work.decide(
            "skip", work.tokens, message_ids=[m.id or "" for m in conversation], detail=detail
        )
        return False
    if text != outcome.text:
        detail["cut_to_chars"] = len(text)
    before = work.tokens
    work.set_summary(text, conversation, dump_ref, outcome.source)
    work.decide(
        kind,  # type: ignore[arg-type]
        before,
        message_ids=[m.id or "" for m in conversation],
        detail=detail,
    )
    return True


@dataclass(frozen=True, kw_only=True, slots=True)
class SlidingWindow:
    """The newest history that fits: shrink one turn (or block) at a time, down to the target.

    After each shrink it prunes again; with `summarize` (or the manager's `auto_compact`) the
    messages that left the window are summarized at the first shrink that fits.
    """

    stage: ClassVar[int] = STAGE_WINDOW
    summarize: bool | None = None
    """Summarize what leaves the window; None follows the manager's `auto_compact`."""

    def __post_init__(self) -> None:
        check_field_types(self)

    def run(self, work: Workspace) -> Plan[None]:
        """Shrink until the prompt is at or under the target."""
        if work.tokens <= work.goal:  # earlier stages (pruning, compaction) were enough
            return
        auto = work.auto_compact if self.summarize is None else self.summarize
        pending: list[BaseMessage] = []
        # What leaves is summarized: cut to the (lower) summary target, leaving room for the
        # summary that will land, so one summarizer call usually suffices.
        final_goal = min(work.goal, work.budget.summary_target_tokens) if auto else work.goal
        # The reserve never takes more than half the goal: in a small window the summary gets
        # cut to fit instead of the window being emptied to make room for it.
        goal = final_goal - (min(_summary_reserve(work), final_goal // 2) if auto else 0)
        summarized = False
        while work.tokens > goal:
            before = work.tokens
            dropped = work.shrink_once()
            if dropped is None:
                break
            pending.extend(dropped)
            work.decide(
                "shrink",
                before,
                message_ids=[m.id or "" for m in dropped],
                detail={"messages": len(dropped)},
            )
            yield from work.prune()
            if auto and not summarized and work.tokens <= goal and pending:
                yield from summarize_span(work, pending, kind="auto_compact")
                summarized = True
                pending, goal = [], final_goal  # the summary has landed: the real goal again
        # Whatever left after the first summary is folded in once more at the end, so a build
        # calls the summarizer at most twice.
        if auto and pending:
            yield from summarize_span(work, pending, kind="auto_compact")
        if work.tokens > work.budget.limit:
            work.drop_task()


def _summary_reserve(work: Workspace) -> int:
    # The summary that will land: at least today's, at most what a summarizer may write.
    current = work.cost(work.summary_message())
    cap = getattr(work.resources, "summary_tokens_cap", 1_024)
    return max(current, min(cap, work.budget.limit // 10))


@dataclass(frozen=True, kw_only=True, slots=True)
class Summarization(SlidingWindow):
    """A sliding window that always summarizes what leaves it (auto-compaction as a strategy)."""

    summarize: bool | None = True


@dataclass(frozen=True, kw_only=True, slots=True)
class Compaction:
    """Externalize large tool outputs to the archive: lossless, restorable by `recall`.

    Oldest first, down to the target; the newest `keep_last` tool results stay whole.
    """

    stage: ClassVar[int] = STAGE_COMPACT
    min_chars: int = 2_000
    """Tool outputs at least this long may be compacted."""
    keep_last: int = 3
    """How many of the newest tool results always stay whole."""
    keep_errors: bool = True
    """Leave error results whole."""
    include_tools: tuple[str, ...] | None = None
    """Only compact these tools (None: all)."""
    exclude_tools: tuple[str, ...] = ()
    """Never compact these tools."""
    preview_chars: int = 100
    """Characters of the output kept as a preview."""

    def __post_init__(self) -> None:
        check_field_types(self)
        if self.min_chars < 0 or self.keep_last < 0 or self.preview_chars < 0:
            msg = (
                "min_chars, keep_last and preview_chars must be >= 0, got "
                f"{self.min_chars}, {self.keep_last}, {self.preview_chars}"
            )
            raise ConfigError(msg)

    def run(self, work: Workspace) -> Plan[None]:
        """Compact until at or under the target (needs an archive)."""
        yield from work.compact(
            min_chars=self.min_chars,
            keep_last=self.keep_last,
            keep_errors=self.keep_errors,
            include=self.include_tools,
            exclude=self.exclude_tools,
            preview_chars=self.preview_chars,
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class DynamicSummarization:
    """Once history passes a threshold, summarize its oldest turns into the running summary.

    Only finished turns are summarized: the newest turn never is.
    """

    stage: ClassVar[int] = STAGE_DYNAMIC
    threshold_turns: int | None = 10
    """Summarize once the prompt holds more turns than this (None: no turn trigger)."""
    threshold_tokens: int | None = None
    """Summarize once the prompt holds more tokens than this (None: no token trigger)."""
    turns: int = 5
    """How many of the oldest turns each summarization takes, at least: more when that is
    what it takes to get back to `threshold_turns` (so the next call does not summarize
    again)."""

    def __post_init__(self) -> None:
        check_field_types(self)
        if self.threshold_turns is None and self.threshold_tokens is None:
            msg = "DynamicSummarization needs threshold_turns or threshold_tokens"
            raise ConfigError(msg)
        if self.turns < 1:
            msg = f"turns must be >= 1, got {self.turns}"
            raise ConfigError(msg)
        for name in ("threshold_turns", "threshold_tokens"):
            value = getattr(self, name)
            if value is not None and value < 0:
                msg = f"{name} must be >= 0 or None, got {value}"
                raise ConfigError(msg)

    def run(self, work: Workspace) -> Plan[None]:
        """Summarize the oldest turns when a threshold is passed."""
        starts = [b.start for b in work.window_blocks() if b.kind == "user"]
        over_turns = self.threshold_turns is not None and len(starts) > self.threshold_turns
        over_tokens = self.threshold_tokens is not None and work.tokens > self.threshold_tokens
        if not (over_turns or over_tokens) or len(starts) < 2:
            return
        take = self.turns
        if over_turns and self.threshold_turns is not None:
            take = max(take, len(starts) - self.threshold_turns)
        cut = starts[min(take, len(starts) - 1)]  # the newest turn always stays
        before = work.tokens
        dropped: list[BaseMessage] = []
        while work.start < cut:
            step = work.shrink_once()
            if step is None:
                break
            dropped.extend(step)
        if dropped:
            work.decide(
                "shrink",
                before,
                message_ids=[m.id or "" for m in dropped],
                detail={"messages": len(dropped), "reason": "dynamic_summarization"},
            )
            yield from summarize_span(work, dropped, kind="summarize")


@dataclass(frozen=True, kw_only=True, slots=True)
class EntityExtraction:
    """Keep a schema of entities (e.g. `{destination, date}`) up to date after each user input.

    The values are injected as JSON in a stable place of the system prompt. When extraction
    fails, the previous values stay and the report records the failure.
    """

    stage: ClassVar[int] = STAGE_EXTRACT
    recent_messages: int = 6
    """How many of the newest messages the extractor sees."""

    def __post_init__(self) -> None:
        check_field_types(self)
        if self.recent_messages < 1:
            msg = (
                f"recent_messages must be >= 1, got {self.recent_messages}; it is how many of "
                "the newest messages the extractor reads"
            )
            raise ConfigError(msg)

    def run(self, work: Workspace) -> Plan[None]:
        """Extract when a new user message arrived since the last extraction."""
        extract = work.resources.extract
        last_user = next((m for m in reversed(work.history) if isinstance(m, HumanMessage)), None)
        entities = dict(work.ledger.get("entities") or {})
        if extract is None or last_user is None or entities.get("last_input_id") == last_user.id:
            return
        before = work.tokens
        old_cost = work.cost(work.system_message())
        recent = work.history[-self.recent_messages :]
        try:
            values = yield extract(list(recent), entities.get("values"))  # type: ignore[arg-type]
            entities.update(values=dict(values), last_input_id=last_user.id, error=None)
        except Exception as exc:  # keep the previous state
            entities.update(last_input_id=last_user.id, error=f"{type(exc).__name__}: {exc}")
        work.ledger["entities"] = entities  # type: ignore[typeddict-item]
        work.tokens += work.cost(work.system_message()) - old_cost
        work.decide(
            "extract",
            before,
            message_ids=[last_user.id or ""],
            detail={"error": entities.get("error")},
        )


_REGISTRY: dict[str, type[Any]] = {
    "sliding_window": SlidingWindow,
    "summarization": Summarization,
    "compaction": Compaction,
    "dynamic_summarization": DynamicSummarization,
    "entity_extraction": EntityExtraction,
}


def register_strategy(name: str, cls: type[Any]) -> None:
    """Make a strategy class buildable from config as `{"type": name, ...}`."""
    if not callable(getattr(cls, "run", None)) or not hasattr(cls, "stage"):
        msg = f"{cls!r} is not a strategy: it needs a `stage` number and a `run(work)` method"
        raise ConfigError(msg)
    _REGISTRY[name] = cls


def strategy_from_config(config: Mapping[str, Any]) -> Strategy:
    """Build one strategy from `{"type": ..., **fields}`."""
    if "type" not in config:
        msg = f"a strategy config needs a 'type'; known types: {', '.join(sorted(_REGISTRY))}"
        raise ConfigError(msg)
    kind = config["type"]
    cls = _REGISTRY.get(kind)
    if cls is None:
        msg = f"unknown strategy type {kind!r}; known types: {', '.join(sorted(_REGISTRY))}"
        raise ConfigError(msg)
    fields = {k: v for k, v in config.items() if k != "type"}
    if dataclasses.is_dataclass(cls):
        allowed = {f.name for f in dataclasses.fields(cls) if f.init}
        unknown = sorted(set(fields) - allowed)
        if unknown:
            msg = f"unknown field(s) {unknown} for strategy {kind!r}; allowed: {sorted(allowed)}"
            raise ConfigError(msg)
    for key, value in fields.items():
        if isinstance(value, list):
            fields[key] = tuple(value)
    try:
        return cls(**fields)  # type: ignore[no-any-return]
    except TypeError as exc:
        msg = (
            f"bad config for strategy {kind!r}: {exc} (fields given: {fields!r}); check each "
            f"value's type against help({cls.__name__})"
        )
        raise ConfigError(msg) from exc


def strategies_from_config(config: str | Mapping[str, Any] | Sequence[Any]) -> list[Strategy]:
    """Build strategies from JSON text, one dict, or a list of dicts and strategy objects."""
    if isinstance(config, str):
        try:
            config = json.loads(config)
        except json.JSONDecodeError as exc:
            msg = f"strategy config is not valid JSON: {exc}"
            raise ConfigError(msg) from exc
    if isinstance(config, Mapping):
        config = [config]
    if isinstance(config, (str, bytes)) or not isinstance(config, Sequence):
        msg = (
            f"strategies must be a list of strategies or config dicts (or JSON of one), got "
            f'{type(config).__name__} {config!r}; e.g. [{{"type": "sliding_window"}}]'
        )
        raise ConfigError(msg)
    out: list[Strategy] = []
    for item in config:  # type: ignore[union-attr]
        if isinstance(item, Mapping):
            out.append(strategy_from_config(item))
        elif isinstance(item, Strategy):
            out.append(item)
        else:
            msg = f"expected a strategy or a config dict, got {item!r}"
            raise ConfigError(msg)
    return out
