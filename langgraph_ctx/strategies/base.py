"""The strategy protocol, and strategies built from plain config (dicts or JSON).

A strategy is any object with `apply(view)`. The build hands the same `PromptView` to each
strategy of its list, in order; a strategy reads the view (its `tokens`, `budget`, `window()`)
and edits it (`prune`, `compact`, `shrink_once`, `set_summary`, ...). `apply` is a plain method
when the strategy needs no I/O, or a generator that yields effects (archive writes, summarizer
and extractor calls) when it does: `x = yield from view.resources.summarize(...)`.

The protocol uses public types only (`PromptView`, `Plan`): a strategy of your own is a small
dataclass, and `register_strategy` makes it buildable from a dict config.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
from collections.abc import Generator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from langgraph_ctx._effects import Plan
from langgraph_ctx.checks import check_bool, check_int, check_number, check_str
from langgraph_ctx.errors import ConfigError, shorten

if TYPE_CHECKING:
    from langgraph_ctx.prompt.view import PromptView


@runtime_checkable
class Strategy(Protocol):
    """What every strategy provides: `apply(view)`.

    Example (keep the newest results of one tool whole, whatever else the build prunes):

        >>> from dataclasses import dataclass
        >>> @dataclass(frozen=True)
        ... class KeepLastResults:
        ...     tool: str
        ...     keep: int = 2
        ...
        ...     def apply(self, view):
        ...         results = [m for m in view.window() if getattr(m, "name", None) == self.tool]
        ...         view.protect(m.id for m in results[-self.keep :])
    """

    def apply(self, view: PromptView) -> Plan[None] | None:
        """Read and edit the view; a generator may yield effects for I/O."""
        ...


def apply_strategy(strategy: Strategy, view: PromptView) -> Plan[None]:
    """Run one strategy on the view: its plan when `apply` is a generator, else the call."""
    result = strategy.apply(view)
    if isinstance(result, Generator):
        yield from result


def archive_or_skip(
    view: PromptView, picked: Sequence[int], what: str
) -> Plan[dict[str, str] | None]:
    """Write the messages at history `picked` to the archive before an edit hides them.

    Returns their references by message id; None when the write failed, which is then a
    `skip` decision naming `what` and the cause (nothing is hidden without its archive copy).
    """
    archive = view.resources.archive_messages
    ids = [view.history[i].id or "" for i in picked]
    if archive is None:
        return None
    try:
        refs: dict[str, str] = yield from archive([view.history[i] for i in picked])
    except Exception as exc:
        reason = f"{what}: archive write failed: {type(exc).__name__}: {exc}"
        view.record("skip", view.tokens, message_ids=ids, detail={"reason": reason})
        return None
    return refs


def check_field_types(config: Any) -> None:
    """Refuse a strategy field whose value is not of its declared kind (`langgraph_ctx.checks`).

    Plain `int`, `bool`, `float` and `str` fields (optionally `| None`) and `tuple[str, ...]`
    fields of tool names are checked. Every `int` field of a strategy is a count or a size,
    so it must be >= 0; a `float` field must be a finite number (its range, a share of the
    limit, is the strategy's own check). The message shows the call, the value, and the
    field's default as the example.

    Raises:
        ConfigError: A field of the wrong kind, a negative count, `nan` or `inf`.
    """
    owner = type(config).__name__
    for f in dataclasses.fields(config):
        declared = str(f.type)
        options = {part.strip() for part in declared.split("|")}
        optional = "None" in options
        options.discard("None")
        value = getattr(config, f.name)
        example = f.default if f.default is not dataclasses.MISSING else None
        if options == {"tuple[str, ...]"}:
            if value is not None or not optional:
                _check_names(config, f.name, value)
        elif options == {"int"}:
            check_int(f.name, value, optional=optional, example=example, owner=owner)
        elif options == {"bool"}:
            check_bool(f.name, value, optional=optional, owner=owner)
        elif options == {"float"}:
            check_number(f.name, value, optional=optional, example=example, owner=owner)
        elif options == {"str"}:
            check_str(f.name, value, optional=optional, example=example, owner=owner)


def _check_names(config: Any, name: str, value: Any) -> None:
    """A names field takes a list of names: a bare string would match by substring."""
    if isinstance(value, (list, tuple, set, frozenset)) and all(isinstance(v, str) for v in value):
        return
    example = (value,) if isinstance(value, str) else ("bash",)
    msg = (
        f"{type(config).__name__}({name}={value!r}): {name} must be a list of tool names, got "
        f"{type(value).__name__}; pass e.g. {example!r}"
    )
    raise ConfigError(msg)


_REGISTRY: dict[str, type[Any]] = {}


def register_strategy(name: str, cls: type[Any]) -> None:
    """Make a strategy class buildable from config as `{"type": name, ...}`."""
    check_str("name", name, example="keep_last_results")
    if not callable(getattr(cls, "apply", None)):
        msg = f"{cls!r} is not a strategy: it needs an `apply(view)` method"
        raise ConfigError(msg)
    _REGISTRY[name] = cls


def registered_types() -> dict[type[Any], str]:
    """Each registered strategy class and the config `type` that builds it."""
    return {cls: name for name, cls in _REGISTRY.items()}


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
        except RecursionError:
            msg = "strategy config nests deeper than Python can read; a config is a flat list"
            raise ConfigError(msg) from None
    if isinstance(config, Mapping):
        config = [config]
    if isinstance(config, (str, bytes)) or not isinstance(config, Sequence):
        msg = (
            f"strategies must be a list of strategies or config dicts (or JSON of one), got "
            f'{type(config).__name__} {shorten(config)}; e.g. [{{"type": "sliding_window"}}]'
        )
        raise ConfigError(msg)
    out: list[Strategy] = []
    for item in config:  # type: ignore[union-attr]
        if isinstance(item, Mapping):
            out.append(strategy_from_config(item))
        elif inspect.isclass(item) or not isinstance(item, Strategy):
            msg = (
                f"expected a strategy or a config dict, got {item!r}; a strategy is an "
                "instance of a class with an apply(view) method"
            )
            raise ConfigError(msg)
        else:
            out.append(item)
    return out
