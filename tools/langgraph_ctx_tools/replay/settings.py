"""The settings `langgraph-ctx frontier` compares, and how to apply one.

`SETTINGS` is the defaults and their neighbours: one field changed per row from
`default_strategies()` or `ContextBudget`, and the previous release's defaults for reference.
It is the list of the frontier table (docs/frontier.md), which `python -m
benchmarks.cost_sweep` replays (it imports it from here). `setting_from_data` reads a setting
of the user's own from its JSON data; `apply_code` says in one line of Python how to run with a
setting.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langgraph_ctx.errors import ConfigError, InputError
from langgraph_ctx.prompt.report import ContextBudget
from langgraph_ctx.strategies import (
    Compaction,
    DropMemory,
    PruneToolOutputs,
    SlidingWindow,
    default_strategies,
    strategies_from_config,
)
from langgraph_ctx.strategies.base import registered_types

__all__ = [
    "PREVIOUS_RELEASE_BUDGET",
    "PREVIOUS_RELEASE_MANAGER",
    "SETTINGS",
    "Changes",
    "Setting",
    "apply_code",
    "setting_from_data",
    "previous_release_strategies",
    "strategy_config",
]

Changes = dict[str, dict[str, Any]]
"""Strategy class name -> the fields to change in the default list's instance of it."""

PREVIOUS_RELEASE_BUDGET: dict[str, Any] = {
    "target": 0.25,
    "summary_target": 0.1,
    "targets_above_fixed": False,
    "cache_price": None,
}
"""The `ContextBudget` fields of the release before the frontier work (issue 29)."""

PREVIOUS_RELEASE_MANAGER: dict[str, Any] = {"summary_placement": "separate"}
"""The `ContextManager` options of that release that differ from today's."""


def previous_release_strategies() -> list[Any]:
    """The default list before the frontier work (issue 29), for reference."""
    return [
        DropMemory(),
        PruneToolOutputs(),
        Compaction(on_arrival=0.1),
        SlidingWindow(summarize=True),
    ]


@dataclass(frozen=True)
class Setting:
    """A row of the frontier: its label and what it changes from the defaults.

    A built-in row changes fields of the default strategies (`strategies`) or of the budget
    (`budget`); a user's row (`setting_from_data`) brings its own strategy list (`given`).
    """

    label: str
    budget: dict[str, Any] = field(default_factory=dict)
    """`ContextBudget` fields to change."""
    strategies: Changes = field(default_factory=dict)
    """Fields to change in the default strategies, by class name."""
    manager: dict[str, Any] = field(default_factory=dict)
    """`ContextMemory` (`ContextManager`) options to change, e.g. `summary_placement`."""
    previous_release: bool = False
    """The previous release's defaults (`previous_release_strategies`, its budget)."""
    given: tuple[Any, ...] | None = None
    """A user's own strategy list, in place of the defaults."""
    source: str | None = None
    """The file a user's setting came from."""

    @property
    def is_defaults(self) -> bool:
        """Whether this row is the defaults themselves."""
        return not (
            self.budget or self.strategies or self.manager or self.previous_release or self.given
        )

    def strategy_list(self) -> list[Any]:
        """The strategies this setting runs, fresh."""
        if self.given is not None:
            return list(self.given)
        if self.previous_release:
            return previous_release_strategies()
        out: list[Any] = []
        for strategy in default_strategies():
            mine = self.strategies.get(type(strategy).__name__)
            out.append(dataclasses.replace(strategy, **mine) if mine else strategy)  # type: ignore[type-var]
        return out

    def budget_changes(self) -> dict[str, Any]:
        """The `ContextBudget` fields this setting changes."""
        return dict(PREVIOUS_RELEASE_BUDGET) if self.previous_release else dict(self.budget)

    def manager_options(self) -> dict[str, Any]:
        """The `ContextManager` options this setting changes."""
        return dict(PREVIOUS_RELEASE_MANAGER) if self.previous_release else dict(self.manager)

    def budget_for(self, window: int, reserved: int) -> ContextBudget:
        """The setting's budget for a window (`ConfigError` for a bad field)."""
        return ContextBudget(
            context_window_tokens=window, reserved_output_tokens=reserved, **self.budget_changes()
        )


SETTINGS: list[Setting] = [
    Setting("defaults"),
    Setting("summarizer reads originals", strategies={"SlidingWindow": {"summarize_shown": False}}),
    Setting(
        "summarizer reads outputs as shown (read_chars None)",
        strategies={"SlidingWindow": {"read_chars": None}},
    ),
    Setting(
        "summarizer also reads the lines the agent used (read_chars 300)",
        strategies={"SlidingWindow": {"read_chars": 300}},
    ),
    Setting(
        "previous defaults: summary before the task, excerpts without new names",
        manager={"summary_placement": "separate"},
        strategies={"Compaction": {"arrival_news": False}},
    ),
    Setting(
        "the summary right after the system prompt (summary_placement separate)",
        manager={"summary_placement": "separate"},
    ),
    Setting(
        "quotes repeat names (quote_repeats, the defaults before issue 43)",
        strategies={"SlidingWindow": {"quote_repeats": True}},
    ),
    Setting("no summaries (window drops)", strategies={"SlidingWindow": {"summarize": False}}),
    Setting("no quoted lines in summaries", strategies={"SlidingWindow": {"quote_share": 0.0}}),
    Setting("quoted lines 0.06 of the room", strategies={"SlidingWindow": {"quote_share": 0.06}}),
    Setting("quoted lines 0.12 of the room", strategies={"SlidingWindow": {"quote_share": 0.12}}),
    Setting("quoted lines 0.15 of the room", strategies={"SlidingWindow": {"quote_share": 0.15}}),
    Setting("quoted lines 0.3 of the room", strategies={"SlidingWindow": {"quote_share": 0.3}}),
    Setting("no excerpt on arrival", strategies={"Compaction": {"on_arrival": None}}),
    Setting("excerpt on arrival over 0.05", strategies={"Compaction": {"on_arrival": 0.05}}),
    Setting(
        "an arriving output read whole once, then excerpted (arrival_read_once)",
        strategies={"Compaction": {"arrival_read_once": True}},
    ),
    Setting(
        "an arriving output's excerpt without its new names (no arrival_news)",
        strategies={"Compaction": {"arrival_news": False}},
    ),
    Setting("model turns stay whole", strategies={"ShortenTurns": {"settle_after": None}}),
    Setting(
        "the newest model turn whole for one call (settle_after 1)",
        strategies={"ShortenTurns": {"settle_after": 1}},
    ),
    Setting(
        "shortened turns keep 2 head and 2 tail lines, args 200",
        strategies={"ShortenTurns": {"head_lines": 2, "tail_lines": 2, "max_arg_chars": 200}},
    ),
    Setting(
        "turns settle after the next, from 400 chars, args 200 (stop 31)",
        strategies={
            "ShortenTurns": {
                "settle_after": 1,
                "min_chars": 400,
                "max_arg_chars": 200,
                "keep_last": 1,
            }
        },
    ),
    Setting(
        "shortened turns' args cut at 100 chars",
        strategies={"ShortenTurns": {"max_arg_chars": 100}},
    ),
    Setting("trigger fixed at 0.9 (no cache_price)", budget={"cache_price": None}),
    Setting("cache_price may start edits anywhere (trigger_floor 0)", budget={"trigger_floor": 0}),
    Setting("trigger 0.8, no cache_price", budget={"trigger": 0.8, "cache_price": None}),
    Setting("target 0.3, summary target 0.1", budget={"target": 0.3, "summary_target": 0.1}),
    Setting("previous release's defaults", previous_release=True),
]
"""The defaults, their neighbours (one change each) and the previous release's defaults."""


def setting_from_data(data: Any, path: str | Path) -> Setting:
    """A setting of the user's own, from the JSON data of the file at `path`.

    The data is strategy configs as `strategies_from_config` reads them (a list of
    `{"type": ..., ...}` or one of them), or an object `{"strategies": [...], "budget":
    {...}, "label": "..."}` whose `budget` holds `ContextBudget` fields to change. The command
    line reads the file (`langgraph_ctx_tools.cli.inputs.load_setting`).

    Raises:
        InputError: The data is not a setting (the message names the file).
    """
    label = f"setting {Path(path).name}"
    budget: Any = {}
    if isinstance(data, Mapping) and "strategies" in data:
        unknown = sorted(set(data) - {"strategies", "budget", "label"})
        if unknown:
            msg = f"setting file {path}: unknown key(s) {unknown}; use strategies, budget, label"
            raise InputError(msg)
        budget = data.get("budget") or {}
        if not isinstance(budget, Mapping):
            msg = f'setting file {path}: "budget" must be an object of ContextBudget fields'
            raise InputError(msg)
        label = str(data.get("label") or label)
        data = data["strategies"]
    try:
        strategies = strategies_from_config(data)
        ContextBudget(context_window_tokens=100_000, **budget)
    except (ConfigError, TypeError) as exc:
        first = str(exc).strip().splitlines()[0]
        msg = f"setting file {path}: {first}"
        raise InputError(msg) from exc
    if not strategies:
        msg = f"setting file {path} lists no strategy"
        raise InputError(msg)
    return Setting(label, budget=dict(budget), given=tuple(strategies), source=str(path))


# --- how to apply a setting ---------------------------------------------------------------------


def _jsonable(value: Any) -> Any:
    if isinstance(value, (tuple, list)):
        return [_jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return repr(value)


def strategy_config(strategies: list[Any]) -> list[dict[str, Any]]:
    """The strategies as configs `strategies_from_config` builds them back from.

    Each lists its registered `type` and the fields that differ from the class's defaults; a
    strategy of an unregistered class is named by its class.
    """
    names = registered_types()
    out = []
    for strategy in strategies:
        config: dict[str, Any] = {"type": names.get(type(strategy), type(strategy).__name__)}
        if dataclasses.is_dataclass(strategy):
            for f in dataclasses.fields(strategy):
                if not f.init:
                    continue
                value = getattr(strategy, f.name)
                if f.default is not dataclasses.MISSING and value == f.default:
                    continue
                if f.default_factory is not dataclasses.MISSING and value == f.default_factory():
                    continue
                config[f.name] = _jsonable(value)
        out.append(config)
    return out


def _python(value: Any) -> str:
    return repr(tuple(value)) if isinstance(value, list) else repr(value)


def _changes(fields: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={_python(v)}" for k, v in fields.items())


def apply_code(setting: Setting, *, window: int, reserved: int, model: str | None) -> str:
    """One line of Python that builds a `ContextMemory` with `setting`.

    Args:
        setting: The setting.
        window: The window in tokens.
        reserved: The output tokens kept free.
        model: The model whose profile gave the window (`model=model`), or None.
    """
    parts = ["model=model"] if model else []
    budget = setting.budget_changes()
    sizes = f"context_window_tokens={window}" + (
        f", reserved_output_tokens={reserved}" if reserved else ""
    )
    if budget:
        parts.append(f"budget=ContextBudget({sizes}, {_changes(budget)})")
    elif not model:
        parts.append(sizes)
    elif reserved:
        parts.append(f"reserved_output_tokens={reserved}")
    if setting.source is not None:
        parts.append(f"strategies=strategies_from_config(Path({setting.source!r}).read_text())")
    elif setting.previous_release:
        config = json.dumps(strategy_config(setting.strategy_list()))
        parts.append(f"strategies=strategies_from_config({config!r})")
    elif setting.strategies:
        cases = " else ".join(
            f"replace(s, {_changes(fields)}) if isinstance(s, {name})"
            for name, fields in setting.strategies.items()
        )
        parts.append(f"strategies=[{cases} else s for s in default_strategies()]")
    parts.extend(f"{name}={value!r}" for name, value in setting.manager_options().items())
    code = f"ContextMemory({', '.join(parts)})"
    return f"{code} (the defaults: nothing to change)" if setting.is_defaults else code
